// The names discovery looks for beside the versioned libraries: the companions, the unversioned
// libraries, the DLSS DLLs, OptiX's data file, and the libraries loaded by name at run time.
// Internal to driver discovery's sources.
#pragma once

#include "driver_discovery.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace unbounded::driver_files {

// Versioned independently of the driver: take the highest version found of each.
inline constexpr const char *COMPANION_PREFIXES[] = {
	"libnvidia-egl-gbm.so.",
	"libnvidia-egl-wayland.so.",
	"libnvidia-egl-wayland2.so.",
	"libnvidia-egl-xcb.so.",
	"libnvidia-egl-xlib.so.",
};
// Libraries of the driver whose file name is their SONAME, without the driver's version, so that no
// *.so.<version> pattern finds them (nvidia-ctk names them explicitly too). libnvidia-api.so.1 is
// NVAPI for Linux: DXVK-NVAPI (and so Proton) loads it for DLSS, Reflex and the GPU's own queries.
inline constexpr const char *UNVERSIONED_LIBRARIES[] = {"libnvidia-api.so.1"};
// DLSS for Windows games: PE files, not ELF, that Proton copies into a game's prefix. Proton looks
// for them in nvidia/wine/ under the directory libGLX_nvidia.so.0 was loaded from, so they go to
// lib/<multiarch>/nvidia/wine/ in the root and in the container, next to the libraries.
inline constexpr const char *WINE_DIR = "nvidia/wine";
inline constexpr const char *WINE_DLLS[] = {"nvngx.dll", "_nvngx.dll"};
inline constexpr std::uint64_t MAX_WINE_DLL_BYTES = 256u << 20;

// OptiX's data file, which libnvoptix.so.<v> reads (from /usr/share/nvidia in a container, where
// nvidia-ctk mounts it). Debian's libnvoptix1 ships it beside the library (nvidia/current/), Ubuntu
// and the .run installer in /usr/share/nvidia. 134 MB in Debian's 535: it is copied only when the
// root has the library that reads it, and `nvoptix: false` leaves it out (see DiscoveryInput).
inline constexpr const char *OPTIX_DATA = "nvoptix.bin";
inline constexpr const char *OPTIX_DATA_DEST = "usr/share/nvidia/nvoptix.bin";
// Where a tree holds it when it is not beside the library: the tree is the host's /usr/share/nvidia,
// /usr/share or /usr.
inline constexpr const char *OPTIX_DATA_IN_SHARE[] = {"nvoptix.bin", "nvidia/nvoptix.bin", "share/nvidia/nvoptix.bin"};
inline constexpr std::uint64_t MAX_OPTIX_DATA_BYTES = 1ull << 30;

inline bool is_unversioned_library(std::string_view name)
{
	return std::any_of(std::begin(UNVERSIONED_LIBRARIES), std::end(UNVERSIONED_LIBRARIES), [&](const char *l) { return name == l; });
}

// Libraries NVIDIA's libraries load by name at run time (dlopen), not through DT_NEEDED, without
// which they fail: libEGL_nvidia opens libnvidia-eglcore.so.<its version> (the string is in the
// library; EGL then finds no NVIDIA device). Checked like DT_NEEDED by the closure check.
struct RuntimeLoad {
	const char *library_prefix;  // "libEGL_nvidia.so." + version
	const char *loads_prefix;    // "libnvidia-eglcore.so." + version
};
inline constexpr RuntimeLoad RUNTIME_LOADS[] = {
	{"libEGL_nvidia.so.", "libnvidia-eglcore.so."},
};

inline bool is_helper(std::string_view name)
{
	return std::any_of(std::begin(HELPER_BINARIES), std::end(HELPER_BINARIES), [&](const char *b) { return name == b; });
}

inline bool is_companion(std::string_view name)
{
	return std::any_of(std::begin(COMPANION_PREFIXES), std::end(COMPANION_PREFIXES), [&](const char *p) { return name.starts_with(p); });
}

}  // namespace unbounded::driver_files
