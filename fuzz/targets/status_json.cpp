// status.json, the last setup's or refresh's report read back by verify (last_run.hpp). Contract:
// nullopt or at most MAX_LAST_RUN_WARNINGS warnings; every string it gives is printable, one line;
// nested past the cap (8 levels) it is nullopt whatever follows; what it gives round-trips: written
// as report.cpp writes those keys and read again, the same command, outcome and warnings.
#define FUZZ_NAME "status_json"
#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "last_run.hpp"

#include <nlohmann/json.hpp>

using namespace unbounded;

namespace {
constexpr unsigned MAX_DEPTH = 8;  // parse_last_run's ParseLimits (last_run.cpp)
constexpr const char *DISPLAY = "/run/unbounded-nvidia/status.json";
}  // namespace

FUZZ_TARGET
{
	// The nesting cap comes first in the file: the bounded check stops there, before the input.
	FUZZ_REQUIRE(!parse_last_run(std::string(MAX_DEPTH + 1, '[') + std::string(text), DISPLAY), "nested too deep, yet read");
	auto last = parse_last_run(text, DISPLAY);
	if (!last)
		return 0;
	FUZZ_REQUIRE(last->warnings.size() <= MAX_LAST_RUN_WARNINGS, std::to_string(last->warnings.size()));
	for (const std::string *s : {&last->command, &last->outcome})
		FUZZ_REQUIRE(is_printable(*s) && s->find('\n') == std::string::npos, *s);
	for (const auto &w : last->warnings)
		FUZZ_REQUIRE(is_printable(w) && w.find('\n') == std::string::npos, w);

	const nlohmann::ordered_json written{{"command", last->command}, {"outcome", last->outcome}, {"warnings", last->warnings}};
	const std::string once = written.dump();
	auto again = parse_last_run(once, DISPLAY);
	FUZZ_REQUIRE(again.has_value(), once);
	FUZZ_REQUIRE(again->command == last->command && again->outcome == last->outcome && again->warnings == last->warnings, once);
	return 0;
}
