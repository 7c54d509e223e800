// The license reloader's state files (applied.state, ...: the licensing files it installed, in
// /var/lib). Contract: a set that parses serialises to text that parses to the same set.
#define FUZZ_NAME "license_state_file"
#include "fuzz_target.hpp"

#include "license_reload.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	auto set = LicenseSet::parse(text);
	if (!set)
		return 0;
	const std::string once = set->serialize();
	auto again = LicenseSet::parse(once);
	FUZZ_REQUIRE(again.has_value(), once);
	FUZZ_REQUIRE(*again == *set, once);
	FUZZ_REQUIRE(again->serialize() == once, once);
	return 0;
}
