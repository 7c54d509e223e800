// The production source of randomness (the license reloader's jitter): uniform, unpredictable across
// machines (the kernel's CSPRNG), so a cluster-wide rotation spreads over the whole jitter window.
#pragma once

#include <cstdint>

namespace unbounded {

// Uniform in [0, bound); 0 when bound <= 1.
std::uint64_t random_below(std::uint64_t bound);

}  // namespace unbounded
