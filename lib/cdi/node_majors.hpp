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

// Fabric and peer devices, each class with a spec of its own, as nvidia-ctk's gated modes write them
// (pkg/nvcdi/gated.go, internal/discover/{nvswitch,gdrcopy,gds}.go): kind nvidia.com/<mode>, one
// device "all" with every node of the class; the runtime asks for them when a container sets
// NVIDIA_NVSWITCH, NVIDIA_GDRCOPY or NVIDIA_GDS to "enabled", Kubernetes through the device name.
//   nvswitch: /dev/nvidia-nvswitchctl (minor 255) and /dev/nvidia-nvswitch<N> (minor N), for the
//             fabric manager and NVLink tools on HGX systems;
//   gdrcopy:  /dev/gdrdrv, GDRCopy's CPU mappings of GPU memory;
//   gds:      /dev/nvidia-fs<N> (minor N), GPUDirect Storage, with /run/udev and /etc/cufile.json
//             mounted read-only while present, as nvidia-ctk mounts them (cuFile reads both).
// Not here: RDMA (/dev/infiniband/*, nvidia-ctk's mofed mode). Those nodes are the network
// adapter's, not the GPU driver's: the network operator's device plugin hands them out per adapter
// (rdma/... resources), a spec offering all of them to any pod that names it would go around it,
// and the host recipes do not bind them into the machine.
// The classes the machine has nodes of, in side_specs() order. A node is taken only when it is a
// character device of the major /proc/devices gives its driver (nvidia-nvswitch, gdrdrv,
// nvidia-fs) and of the minor its name says: /dev/gdrdrv made as 1:1 would be /dev/mem. Without that
// major the class is left out, with a warning when it has nodes. The names bound the count: at most
// 256 nodes per class (nvswitch 0..254 and ctl, nvidia-fs 0..255).
// `dev_names`: the entries of the machine's /dev, read once for the whole inventory.
std::vector<FabricDevices> enumerate_fabric(const Context &ctx, CharMajors &majors, const std::vector<std::string> &dev_names,
					    std::vector<std::string> &warnings);

}  // namespace unbounded
