// status.json, the last setup's or refresh's report read back by verify (last_run.hpp). Contract:
// nullopt or at most MAX_LAST_RUN_WARNINGS warnings; every string it gives is printable, one line.
#define FUZZ_NAME "status_json"
#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "last_run.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	auto last = parse_last_run(text, "/run/unbounded-nvidia/status.json");
	if (!last)
		return 0;
	FUZZ_REQUIRE(last->warnings.size() <= MAX_LAST_RUN_WARNINGS, std::to_string(last->warnings.size()));
	for (const std::string *s : {&last->command, &last->outcome})
		FUZZ_REQUIRE(is_printable(*s) && s->find('\n') == std::string::npos, *s);
	for (const auto &w : last->warnings)
		FUZZ_REQUIRE(is_printable(w) && w.find('\n') == std::string::npos, w);
	return 0;
}
