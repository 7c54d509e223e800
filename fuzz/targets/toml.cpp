// containerd's configuration (TOML), read by verify. Contract: a value or one printable error line
// naming the file, and nesting within the limits.
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
	auto r = parse_toml_bounded(text, "/etc/containerd/config.toml", ParseLimits{16, 5000});
	if (!r) {
		FUZZ_REQUIRE_LINE(r.error().message);
		FUZZ_REQUIRE(r.error().message.starts_with("/etc/containerd/config.toml"), r.error().message);
		return 0;
	}
	FUZZ_REQUIRE(depth(*r) <= 17, r->dump());
	return 0;
}
