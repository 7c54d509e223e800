// The graphics configuration files of NVIDIA's driver that loaders find by directory, not by library
// name: the EGL vendor file glvnd reads, the EGL external platforms, the Vulkan ICD and implicit layer,
// the OpenCL ICD. A pod that renders or computes through EGL, Vulkan or OpenCL finds no NVIDIA driver
// without them (nvidia-ctk's internal/discover/graphics.go mounts the same files). They are taken when
// the host binds the directory that holds them, checked to be NVIDIA's (by name, then by content: the
// library they name must be an NVIDIA one), and copied into the root like the libraries, so a host
// upgrade never changes what running pods see.
#pragma once

#include "error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace unbounded::graphics_config {

enum class Content {
	Json,     // {"ICD": {"library_path": ...}} or {"layer": {"library_path": ...}}
	IcdList,  // OpenCL's .icd: one line, the library's name
};

struct Kind {
	const char *name;       // the file's name
	const char *root_dir;   // its directory in the driver root = its path in the container, without '/'
	const char *parent;     // the directory's own name, and its parent's ("glvnd/egl_vendor.d"): a staging
				// tree may hold the file in its root (the host bound egl_vendor.d), under the
				// last component (it bound glvnd/) or under both (it bound share/)
	Content content;
};

// Where loaders look by default: glvnd and the Vulkan loader search /usr/share (and /etc), the OpenCL
// ICD loader /etc/OpenCL/vendors only.
inline constexpr Kind KINDS[] = {
	{"10_nvidia.json", "usr/share/glvnd/egl_vendor.d", "glvnd/egl_vendor.d", Content::Json},
	{"15_nvidia_gbm.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Json},
	{"10_nvidia_wayland.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Json},
	{"09_nvidia_wayland2.json", "usr/share/egl/egl_external_platform.d", "egl/egl_external_platform.d", Content::Json},
	{"nvidia_icd.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Json},
	{"nvidia_icd.x86_64.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Json},
	{"nvidia_icd.aarch64.json", "usr/share/vulkan/icd.d", "vulkan/icd.d", Content::Json},
	{"nvidia_layers.json", "usr/share/vulkan/implicit_layer.d", "vulkan/implicit_layer.d", Content::Json},
	{"nvidia.icd", "etc/OpenCL/vendors", "OpenCL/vendors", Content::IcdList},
};

// A configuration file is small; anything larger is not one (and is not read whole).
inline constexpr std::size_t MAX_BYTES = 64 * 1024;

// The library a configuration file names, when its text is one of NVIDIA's: "" and `why` set when it is
// not (another vendor's, malformed, too deep or too large).
std::string nvidia_library_of(const Kind &kind, std::string_view text, const std::string &display, std::string &why);

}  // namespace unbounded::graphics_config
