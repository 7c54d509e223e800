// The numbers the GPU, control and DRM nodes must have before a spec offers them `rwm` to every GPU
// pod: /dev/nvidia0 made as 1:1 is /dev/mem. Each node is taken only as a
// character device of its driver's major with the minor its name implies:
//   /dev/nvidia<N>       N (0..253)   the NVIDIA driver: /proc/devices "nvidia-frontend" (or "nvidia")
//   /dev/nvidia-modeset  254          the same major (nvidia-modeset's device goes through the frontend)
//   /dev/nvidiactl       255          the same major
//   /dev/nvidia-uvm      0, -tools 1  /proc/devices "nvidia-uvm" (dynamic)
//   /dev/dri/card<N>, renderD<N>  N   /proc/devices "drm"
// 195 and 226 are the numbers these drivers always register (LANANA's devices.txt, NV_MAJOR_DEVICE_NUMBER
// and DRM_MAJOR), outside the ranges the kernel hands out dynamically: where /proc/devices does not
// name the driver (not loaded), a node of that number can reach no other driver, so it is checked
// against the fixed number, and refused when /proc/devices gives the number to another driver.
// nvidia-uvm's major is dynamic: without its line in /proc/devices its nodes are refused.
// /proc/devices unreadable: a kernel always has it (fs/proc/devices.c makes it unconditionally), so
// this is a fake or offline root, where no container opens the nodes; the fixed numbers are still
// checked there and UVM's nodes are taken on their type and minor (the old fake roots have none).
#pragma once

#include "context.hpp"
#include "devices.hpp"
#include "mig.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

inline constexpr unsigned NVIDIA_FIXED_MAJOR = 195;
inline constexpr unsigned DRM_FIXED_MAJOR = 226;

struct NodeMajors {
	std::optional<unsigned> nvidia, uvm, drm;  // nullopt: no node of that driver is taken
	bool uvm_unchecked = false;                // /proc/devices unreadable: UVM's major cannot be known
	static NodeMajors from(CharMajors &majors);
};

// The node at `path` when it is a character device numbered major:minor of `driver`; nullopt when it is
// missing or not a character device (silently: callers say what that costs), or numbered otherwise
// (a warning naming the node, its numbers and the expected ones).
std::optional<DeviceNode> checked_node(const Context &ctx, const std::string &path, const std::optional<unsigned> &major,
				       bool major_unchecked, unsigned minor, const char *driver, std::vector<std::string> &warnings);

// The minor a /dev/dri entry's name implies (card1 -> 1, renderD128 -> 128); nullopt for other names.
std::optional<unsigned> drm_minor(std::string_view name);

}  // namespace unbounded
