// The graphics ICD/layer files of a staged driver (EGL vendor, Vulkan ICD and layer, OpenCL .icd).
// The first byte picks the kind, the rest is the file. Contract: a library name, or "" with `why`
// one printable line.
#define FUZZ_NAME "graphics_config"
#include "fuzz_target.hpp"

#include "graphics_config.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	if (size == 0)
		return 0;
	const auto &kind = graphics_config::KINDS[data[0] % std::size(graphics_config::KINDS)];
	std::string why;
	const std::string lib = graphics_config::nvidia_library_of(kind, text.substr(1), "/run/host-nvidia/0/nvidia_icd.json", why);
	if (lib.empty())
		FUZZ_REQUIRE_LINE(why);
	else
		FUZZ_REQUIRE(why.empty(), why);
	for (bool present : {true, false}) {
		const std::string u = graphics_config::unloadable(lib, "/lib/x86_64-linux-gnu", [&](std::string_view) { return present; });
		if (!u.empty())
			FUZZ_REQUIRE_LINE(u);
	}
	return 0;
}
