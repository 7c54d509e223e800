// The production jitter source: bounds, and a spread over the whole window.
#include "random.hpp"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("random_below stays in [0, bound) and degenerates to 0", "[random]")
{
	CHECK(random_below(0) == 0);
	CHECK(random_below(1) == 0);
	for (int i = 0; i < 1000; i++) {
		CHECK(random_below(2) < 2);
		CHECK(random_below(60'001) < 60'001);
	}
}

TEST_CASE("random_below spreads a jitter window evenly", "[random]")
{
	// 20,000 draws of a 60 s jitter in ms: every tenth of the window is hit about 2,000 times
	// (a binomial standard deviation of 42: 1,700..2,300 is over 7 of them), the extremes are reached.
	constexpr std::uint64_t bound = 60'001;
	std::array<int, 10> deciles{};
	std::uint64_t lo = bound, hi = 0;
	for (int i = 0; i < 20'000; i++) {
		const std::uint64_t v = random_below(bound);
		deciles[v * 10 / bound]++;
		lo = std::min(lo, v);
		hi = std::max(hi, v);
	}
	for (int d : deciles) {
		CHECK(d > 1'700);
		CHECK(d < 2'300);
	}
	CHECK(lo < 100);
	CHECK(hi > bound - 100);
	// Two draws in a row are not the same value (a constant or a reseeded-per-call source would be).
	int same = 0;
	for (int i = 0; i < 100; i++)
		same += random_below(bound) == random_below(bound);
	CHECK(same < 5);
}
