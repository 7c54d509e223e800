// /proc/driver/nvidia/gpus/<pci>/information, through enumerate_devices under a fake root (no
// /dev/nvidia<N> there: the listed GPU has no node). Contract: the error (exit 1, not ready) and
// every warning are one printable line; a GPU taken has a minor the file named.
#define FUZZ_NAME "gpu_information"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "devices.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	static const Context ctx = [] {
		Context c;
		c.root = fuzz::scratch() + "/root";
		fuzz::reset_dir(c.root + "/dev");
		return c;
	}();
	fuzz::write_file(ctx.root + "/proc/driver/nvidia/gpus/0000:18:00.0/information", text);
	auto inv = enumerate_devices(ctx);
	if (!inv) {
		FUZZ_REQUIRE_LINE(inv.error().message);
		FUZZ_REQUIRE(inv.error().exit_code == EXIT_NOT_READY, inv.error().message);
		return 0;
	}
	for (const auto &w : inv->warnings)
		FUZZ_REQUIRE_LINE(w);
	return 0;
}
