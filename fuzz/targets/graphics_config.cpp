// The graphics ICD/layer files of a staged driver (EGL vendor, Vulkan ICD and layer, OpenCL .icd).
// The first byte picks the kind, the rest is the file. Contract: a library name, or "" with `why`
// one printable line; a JSON kind's file nested past the cap (8 levels) is refused so, whatever
// follows.
#define FUZZ_NAME "graphics_config"
#include "fuzz_target.hpp"

#include "graphics_config.hpp"

using namespace unbounded;

namespace {
constexpr unsigned MAX_DEPTH = 8;  // nvidia_library_of's ParseLimits (graphics_config.cpp)
}

FUZZ_TARGET
{
	if (size == 0)
		return 0;
	const auto &kind = graphics_config::KINDS[data[0] % std::size(graphics_config::KINDS)];
	const std::string display = "/run/host-nvidia/0/nvidia_icd.json";
	std::string why;
	const std::string lib = graphics_config::nvidia_library_of(kind, text.substr(1), display, why);
	if (lib.empty())
		FUZZ_REQUIRE_LINE(why);
	else
		FUZZ_REQUIRE(why.empty(), why);
	for (bool present : {true, false}) {
		const std::string u = graphics_config::unloadable(lib, "/lib/x86_64-linux-gnu", [&](std::string_view) { return present; });
		if (!u.empty())
			FUZZ_REQUIRE_LINE(u);
	}
	// The nesting cap comes first in the file: the bounded check stops there, before the input.
	if (kind.content != graphics_config::Content::IcdList) {
		std::string over_why;
		const std::string over(MAX_DEPTH + 1, '[');
		FUZZ_REQUIRE(graphics_config::nvidia_library_of(kind, over + std::string(text.substr(1)), display, over_why).empty(), over);
		FUZZ_REQUIRE(over_why.find("deeper") != std::string::npos, over_why);
		FUZZ_REQUIRE_LINE(over_why);
	}
	return 0;
}
