// The configuration file (/etc/unbounded-nvidia/config.yaml): an operator's, read as root at boot.
// Contract: a value or one printable line with EXIT_USAGE (README: exit 2, bad configuration); a
// file over load_config's cap (1 MiB) is refused so, whatever it holds.
#define FUZZ_NAME "config"
#include "fuzz_target.hpp"

#include "config.hpp"

#include <cerrno>

using namespace unbounded;

namespace {
constexpr std::size_t MAX_CONFIG_BYTES = 1u << 20;  // load_config's read (config.cpp)
}

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
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		fuzz::write_file(path, fuzz::over_cap(text, MAX_CONFIG_BYTES, '#'));
		auto o = load_config(path, true);
		FUZZ_REQUIRE(!o && o.error().errnum == EFBIG, o ? std::string("taken") : o.error().message);
		FUZZ_REQUIRE_LINE(o.error().message);
		FUZZ_REQUIRE(o.error().exit_code == EXIT_USAGE, o.error().message);
	}
	return 0;
}
