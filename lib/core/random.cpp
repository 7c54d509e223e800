#include "random.hpp"

#include <chrono>
#include <sys/random.h>

namespace unbounded {
namespace {

std::uint64_t random_u64()
{
	std::uint64_t v = 0;
	if (::getrandom(&v, sizeof(v), 0) == sizeof(v))
		return v;
	// No entropy pool yet (very early boot) or a seccomp filter: mix the clock, still spread
	// across machines that boot at different moments.
	static std::uint64_t state = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
				     static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
	state += 0x9e3779b97f4a7c15ULL;  // splitmix64
	std::uint64_t z = state;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

}  // namespace

std::uint64_t random_below(std::uint64_t bound)
{
	if (bound <= 1)
		return 0;
	// Rejection sampling: a plain modulo would favour the low values.
	const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
	for (;;) {
		const std::uint64_t v = random_u64();
		if (v < limit)
			return v % bound;
	}
}

}  // namespace unbounded
