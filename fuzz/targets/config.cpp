// The configuration file (/etc/unbounded-nvidia/config.yaml): an operator's, read as root at boot.
// Contract: a value or one printable line with EXIT_USAGE (README: exit 2, bad configuration).
#define FUZZ_NAME "config"
#include "fuzz_target.hpp"

#include "config.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	auto r = parse_config(text, "/etc/unbounded-nvidia/config.yaml");
	if (!r) {
		FUZZ_REQUIRE_LINE(r.error().message);
		FUZZ_REQUIRE(r.error().exit_code == EXIT_USAGE, r.error().message);
	}
	// Read from a file as setup does: the same answer.
	const std::string path = fuzz::scratch() + "/config.yaml";
	fuzz::write_file(path, text);
	auto f = load_config(path, true);
	FUZZ_REQUIRE(f.has_value() == r.has_value(), f ? std::string("file parsed, text did not") : f.error().message);
	if (!f) {
		FUZZ_REQUIRE_LINE(f.error().message);
		FUZZ_REQUIRE(f.error().exit_code == EXIT_USAGE, f.error().message);
	}
	return 0;
}
