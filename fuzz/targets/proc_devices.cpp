// /proc/devices: the character majors by driver name. Contract: names are trimmed and not empty,
// majors are what the line said (only "Character devices:" lines count).
#define FUZZ_NAME "proc_devices"
#include "fuzz_target.hpp"

#include "mig.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	for (const auto &[name, major] : parse_proc_devices(text)) {
		FUZZ_REQUIRE(!name.empty(), "empty name");
		FUZZ_REQUIRE(name.front() != ' ' && name.back() != ' ' && name.front() != '\t' && name.back() != '\t', name);
		FUZZ_REQUIRE(text.find(name) != std::string_view::npos, name);
		FUZZ_REQUIRE(text.find(std::to_string(major)) != std::string_view::npos || major == 0, name);
	}
	return 0;
}
