// The CDI specs setup writes beside nvidia.yaml, one per class of device nodes, each only while the
// machine has such nodes: a spec of ours whose nodes are gone is removed (setup, refresh, cleanup),
// one anyone else wrote is left alone. Kinds and device names are nvidia-ctk's (pkg/nvcdi:
// `--class imex-channel` and the gated modes nvswitch, gdrcopy and gds).
#pragma once

#include "config.hpp"

#include <array>
#include <string>

namespace unbounded {

inline constexpr const char *IMEX_CDI_KIND = "nvidia.com/imex-channel";
inline constexpr const char *NVSWITCH_CDI_KIND = "nvidia.com/nvswitch";
inline constexpr const char *GDRCOPY_CDI_KIND = "nvidia.com/gdrcopy";
inline constexpr const char *GDS_CDI_KIND = "nvidia.com/gds";

struct SideSpec {
	const char *key;  // its configuration key
	const char *kind;
	const char *what;         // "IMEX channels": what the machine has none of when it is removed
	const std::string *path;  // in the machine, from the configuration
};

// In the order they are changed: each before nvidia.yaml, which names the driver root.
inline std::array<SideSpec, 4> side_specs(const Config &cfg)
{
	return {{
		{"imex_cdi_spec", IMEX_CDI_KIND, "IMEX channels", &cfg.imex_cdi_spec},
		{"nvswitch_cdi_spec", NVSWITCH_CDI_KIND, "NVSwitch nodes", &cfg.nvswitch_cdi_spec},
		{"gdrcopy_cdi_spec", GDRCOPY_CDI_KIND, "GDRCopy node", &cfg.gdrcopy_cdi_spec},
		{"gds_cdi_spec", GDS_CDI_KIND, "GPUDirect Storage nodes", &cfg.gds_cdi_spec},
	}};
}

}  // namespace unbounded
