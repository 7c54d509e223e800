// Human-readable figures for log lines and STATUS= ("150.2 MiB", "210ms").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace unbounded {

std::string format_bytes(std::uint64_t bytes);
std::string format_ms(std::chrono::milliseconds ms);

}  // namespace unbounded
