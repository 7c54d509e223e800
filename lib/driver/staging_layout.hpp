// Where driver files live inside a staging tree, relative to its root: read by discovery, watched by
// the refresh path unit and stamped by the refresh's settle wait, so all three agree.
#pragma once

namespace unbounded::staging_layout {

// Directories searched in every staging tree. Debian keeps the real files in nvidia/current/ (with
// SONAME links in the lib dir itself); VDPAU lives in a vdpau/ subdirectory.
inline constexpr const char *SCAN_DIRS[] = {"", "nvidia/current", "vdpau", "nvidia/current/vdpau", "bin"};
// Parents of the per-version GSP firmware directories (<dir>/<version>/*.bin). "" is the tree itself:
// the host's /lib/firmware/nvidia bound as a staging mount of its own.
inline constexpr const char *FIRMWARE_DIRS[] = {"firmware/nvidia", "nvidia", "lib/firmware/nvidia", ""};
// Drivers from this major version on ship GSP firmware (gsp_*.bin) that GPUs running the GSP load.
inline constexpr int FIRST_GSP_DRIVER_MAJOR = 510;

}  // namespace unbounded::staging_layout
