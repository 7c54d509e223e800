// The manifest read back from a driver root (.unbounded-manifest.json). Contract: one printable
// error line, or a manifest whose to_json() parses back to the same bytes.
#define FUZZ_NAME "manifest"
#include "fuzz_target.hpp"

#include "manifest.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	auto m = Manifest::from_json(std::string(text), "/run/nvidia/driver/.unbounded-manifest.json");
	if (!m) {
		FUZZ_REQUIRE_LINE(m.error().message);
		return 0;
	}
	const std::string once = m->to_json();
	auto again = Manifest::from_json(once, "again");
	FUZZ_REQUIRE(again.has_value(), again ? once : again.error().message);
	FUZZ_REQUIRE(again->to_json() == once, once);
	return 0;
}
