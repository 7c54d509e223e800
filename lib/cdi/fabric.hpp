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
#pragma once

#include "context.hpp"
#include "devices.hpp"
#include "mig.hpp"

#include <string>
#include <vector>

namespace unbounded {

// The classes the machine has nodes of, in side_specs() order. A node is taken only when it is a
// character device of the major /proc/devices gives its driver (nvidia-nvswitch, gdrdrv,
// nvidia-fs) and of the minor its name says: /dev/gdrdrv made as 1:1 would be /dev/mem. Without that
// major the class is left out, with a warning when it has nodes. The names bound the count: at most
// 256 nodes per class (nvswitch 0..254 and ctl, nvidia-fs 0..255).
// `dev_names`: the entries of the machine's /dev, read once for the whole inventory.
std::vector<FabricDevices> enumerate_fabric(const Context &ctx, CharMajors &majors, const std::vector<std::string> &dev_names,
					    std::vector<std::string> &warnings);

}  // namespace unbounded
