// containerd's configuration (TOML), read by verify. Contract: a value or one printable error line
// naming the file, and nesting within the limits; nested past the cap, refused whatever follows (as
// too deep, or for what follows when that is not TOML: toml++ reads the whole text first).
#define FUZZ_NAME "toml"
#include "fuzz_target.hpp"

#include "toml_reader.hpp"

using namespace unbounded;

namespace {

unsigned depth(const nlohmann::json &j)
{
	unsigned d = 0;
	if (j.is_structured())
		for (const auto &v : j)
			d = std::max(d, depth(v));
	return j.is_structured() ? d + 1 : 0;
}

}  // namespace

FUZZ_TARGET
{
	const ParseLimits limits{16, 5000};
	// The nesting cap first in the file: refused there in one line, whatever follows.
	const std::string over = "x = " + std::string(limits.max_depth + 2, '[') + "\n" + std::string(text);
	auto o = parse_toml_bounded(over, "/etc/containerd/config.toml", limits);
	FUZZ_REQUIRE(!o, o->dump());
	FUZZ_REQUIRE_LINE(o.error().message);
	auto r = parse_toml_bounded(text, "/etc/containerd/config.toml", limits);
	if (!r) {
		FUZZ_REQUIRE_LINE(r.error().message);
		FUZZ_REQUIRE(r.error().message.starts_with("/etc/containerd/config.toml"), r.error().message);
		return 0;
	}
	FUZZ_REQUIRE(depth(*r) <= 17, r->dump());
	return 0;
}
