// The graphics configuration files of NVIDIA's driver that loaders find by directory, not by library
// name: the EGL vendor file glvnd reads, the EGL external platforms, the Vulkan ICD and implicit layer,
// the OpenCL ICD. A pod that renders or computes through EGL, Vulkan or OpenCL finds no NVIDIA driver
// without them (nvidia-ctk's internal/discover/graphics.go mounts the same files). They are taken when
// the host binds the directory that holds them, checked to be NVIDIA's (by name, then by content: the
// library they name must be an NVIDIA one), and copied into the root like the libraries, so a host
// upgrade never changes what running pods see.
#pragma once

#include "error.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded::graphics_config {

enum class Content {
	Icd,      // {"ICD": {"library_path": ...}}: glvnd's EGL vendors, EGL platforms, Vulkan ICDs
	Layer,    // {"layer": {"library_path": ...}}: a Vulkan layer
	IcdList,  // OpenCL's .icd: one line, the library's name
};

struct Kind {
	const char *name;      // the file's name
	const char *root_dir;  // its directory in the driver root = its path in the container, without '/'
	const char *parent;    // the directory's own name, and its parent's ("glvnd/egl_vendor.d"): a staging
			       // tree may hold the file in its root (the host bound egl_vendor.d), under the
			       // last component (it bound glvnd/) or under both (it bound share/)
	Content content;
};

// Where loaders look by default: glvnd and the Vulkan loader search /usr/share (and /etc), the OpenCL
// ICD loader /etc/OpenCL/vendors only.
inline constexpr Kind KINDS[] = {
	{"10_nvidia.json", "usr/share/glvnd/egl_vendor.d", "glvnd/egl_vendor.d", Content::Icd},
	{"15_nvidia_gbm.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Icd},
	{"10_nvidia_wayland.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Icd},
	{"09_nvidia_wayland2.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Icd},
	{"nvidia_icd.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Icd},
	{"nvidia_icd.x86_64.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Icd},
	{"nvidia_icd.aarch64.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Icd},
	{"nvidia_layers.json", "usr/share/vulkan/implicit_layer.d", "vulkan/implicit_layer.d", Content::Layer},
	{"nvidia.icd", "etc/OpenCL/vendors", "OpenCL/vendors", Content::IcdList},
};

// A configuration file is small; anything larger is not one (and is not read whole).
inline constexpr std::size_t MAX_BYTES = 64 * 1024;

// The library a configuration file names, when its text is one of NVIDIA's: "" and `why` set when it is
// not (another vendor's, malformed, too deep or too large).
std::string nvidia_library_of(const Kind &kind, std::string_view text, const std::string &display, std::string &why);

// Why a pod's loader would not load `library` (what a config of NVIDIA's names), "" when it would.
// `libdir` is the driver's lib dir in the container ("/lib/x86_64-linux-gnu"); `in_root` says whether
// the root holds a file or SONAME link of that name there.
std::string unloadable(std::string_view library, const std::string &libdir, const std::function<bool(std::string_view)> &in_root);

}  // namespace unbounded::graphics_config
