// /proc/driver/nvidia/gpus/<pci>/information, through enumerate_devices under a fake root (no
// /dev/nvidia<N> there: the listed GPU has no node). Contract: the error (exit 1, not ready) and
// every warning are one printable line; a file over the cap (64 KiB) is that error, whatever it
// holds.
#define FUZZ_NAME "gpu_information"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "devices.hpp"

#include <cerrno>

using namespace unbounded;

namespace {
constexpr std::size_t MAX_INFORMATION_BYTES = 64 * 1024;  // enumerate_devices' read (devices.cpp)
constexpr const char *INFORMATION = "/proc/driver/nvidia/gpus/0000:18:00.0/information";
}  // namespace

FUZZ_TARGET
{
	const Context &ctx = fuzz::machine_context(FUZZ_NAME, {"dev"});
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		fuzz::write_file(ctx.root + INFORMATION, fuzz::over_cap(text, MAX_INFORMATION_BYTES, '\n'));
		auto o = enumerate_devices(ctx);
		FUZZ_REQUIRE(!o && o.error().errnum == EFBIG, o ? std::string("taken") : o.error().message);
		FUZZ_REQUIRE_LINE(o.error().message);
		FUZZ_REQUIRE(o.error().exit_code == EXIT_NOT_READY, o.error().message);
	}
	fuzz::write_file(ctx.root + INFORMATION, text);
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
