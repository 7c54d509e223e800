// The JSON spec the NVIDIA device plugin (and the DRA driver) write into /var/run/cdi, from a pod:
// read capped at MAX_SPEC_BYTES, checked without building first (check_json_bounded), structure,
// the root it was generated from, core mounts and host paths under a fake root. Contract: a spec
// over the cap is one problem; every problem is one printable line.
#define FUZZ_NAME "device_plugin_spec"
#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "context.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	const Context &ctx = fuzz::machine_context(FUZZ_NAME);
	const std::string path = "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json";
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		fuzz::write_file(ctx.root + path, fuzz::over_cap(text, MAX_SPEC_BYTES, ' '));
		auto p = verify_device_plugin_spec(ctx, path, "535.104.05");
		FUZZ_REQUIRE(p.size() == 1 && p[0].message.find("larger than") != std::string::npos,
			     p.empty() ? "no problem" : p[0].message);
		FUZZ_REQUIRE_LINE(p[0].message);
	}
	fuzz::write_file(ctx.root + path, text);
	std::optional<Problem> wiring;  // a spec generated from another root: one problem naming the settings
	for (const auto &p : verify_device_plugin_spec(ctx, path, "535.104.05", &wiring))
		FUZZ_REQUIRE_LINE(p.message);
	if (wiring)
		FUZZ_REQUIRE_LINE(wiring->message);
	return 0;
}
