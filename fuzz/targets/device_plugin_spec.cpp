// The JSON spec the NVIDIA device plugin (and the DRA driver) write into /var/run/cdi, from a pod:
// read capped at MAX_SPEC_BYTES, checked without building first (check_json_bounded), structure,
// core mounts and host paths under a fake root. Contract: every problem is one printable line.
#define FUZZ_NAME "device_plugin_spec"
#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "context.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	static const Context ctx = [] {
		Context c;
		c.root = fuzz::scratch() + "/root";
		fuzz::reset_dir(c.root);
		return c;
	}();
	const std::string path = "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json";
	static bool over_cap_checked = false;
	if (!over_cap_checked) {
		over_cap_checked = true;
		fuzz::write_file(ctx.root + path, std::string(MAX_SPEC_BYTES + 1, ' '));
		auto p = verify_device_plugin_spec(ctx, path, "535.104.05");
		FUZZ_REQUIRE(p.size() == 1, p.empty() ? "no problem" : p[0].message);
		FUZZ_REQUIRE_LINE(p[0].message);
	}
	fuzz::write_file(ctx.root + path, text);
	for (const auto &p : verify_device_plugin_spec(ctx, path, "535.104.05"))
		FUZZ_REQUIRE_LINE(p.message);
	return 0;
}
