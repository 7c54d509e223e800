// The GPUs and NVIDIA device nodes the machine was given, read the way nvidia-ctk reads them without
// NVML: /proc/driver/nvidia/gpus/<pci>/information (index = PCI bus order, "Device Minor" N means
// /dev/nvidiaN), falling back to the /dev/nvidia<N> nodes themselves when those entries are absent.
// Majors and minors always come from the nodes, never from assumptions (nvidia-uvm's is dynamic).
#pragma once

#include "context.hpp"
#include "error.hpp"

#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct DeviceNode {
	std::string path;  // in the machine: "/dev/nvidia0"
	unsigned major = 0, minor = 0;
	unsigned mode = 0;  // permission bits
	unsigned gid = 0;
};

// One MIG compute instance (mig.hpp): what a container needs besides its parent's /dev/nvidiaN.
struct MigDevice {
	DeviceNode gi_access, ci_access;  // /dev/nvidia-caps/nvidia-cap<minor>
};

// One IMEX channel (imex.hpp): /dev/nvidia-caps-imex-channels/channel<id>.
struct ImexChannel {
	unsigned id = 0;
	DeviceNode node;
};

// The nodes of one fabric or peer device class (fabric.hpp), for a spec of its own.
struct FabricDevices {
	const char *kind = nullptr;       // NVSWITCH_CDI_KIND, ...
	std::vector<DeviceNode> nodes;    // by path
	std::vector<std::string> mounts;  // machine paths mounted at the same path (gds only)
};

struct Gpu {
	std::string pci;  // "0000:18:00.0", "" when enumerated from /dev only
	unsigned minor = 0;
	std::optional<std::string> uuid;  // only when fully known (not "GPU-????????-...")
	std::vector<DeviceNode> nodes;    // /dev/nvidia<minor>, then its DRM nodes
	bool mig_enabled = false;         // it has GPU instances: no whole-GPU device, as nvidia-ctk
	std::vector<MigDevice> migs;      // its compute instances, by (gi, ci)
};

struct DeviceInventory {
	std::vector<Gpu> gpus;                   // index order
	std::vector<DeviceNode> control;         // nvidia-modeset, nvidia-uvm, nvidia-uvm-tools, nvidiactl (those that exist)
	std::vector<ImexChannel> imex_channels;  // by id
	std::vector<FabricDevices> fabric;       // the classes with nodes, in side_specs() order
	std::vector<std::string> ipc;            // the IPC endpoints to mount (ipc.hpp), unless ipc_sockets is off
	std::string source;                      // "proc" or "dev"
	std::size_t listed_gpus = 0;             // in /proc/driver/nvidia/gpus (the host's, not namespaced)
	std::vector<std::string> unbound_gpus;   // PCI addresses of the listed GPUs this machine has no node of
	std::vector<std::string> warnings;

	std::size_t mig_devices() const
	{
		std::size_t n = 0;
		for (const auto &g : gpus)
			n += g.migs.size();
		return n;
	}
};

inline constexpr const char *CONTROL_NODES[] = {"/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
						"/dev/nvidiactl"};

// /proc/driver/nvidia/gpus is not namespaced: a machine sees every GPU of its host there, whatever
// /dev/nvidia<N> nodes it was given (a host may split its GPUs between machines). It offers exactly
// the listed GPUs whose node (node_of(minor)) it has, in PCI order, so indices run 0..N-1 over
// those, as NVML numbers the GPUs a process can open; the others are named by PCI address.
struct GpuPartition {
	std::vector<Gpu> bound;            // PCI order, each with its /dev/nvidia<minor> first in nodes
	std::vector<std::string> unbound;  // PCI addresses
};
GpuPartition partition_gpus(std::vector<Gpu> listed, const std::function<std::optional<DeviceNode>(unsigned minor)> &node_of);

// Listed GPUs without a node are one warning; no GPU offered at all is a failure. MIG instances
// (mig.hpp) and IMEX channels (imex.hpp) are read with the GPUs, for the GPUs offered.
Result<DeviceInventory> enumerate_devices(const Context &ctx);

// A character device at `path` (machine path) under the root; nullopt when missing or not a char device.
std::optional<DeviceNode> read_device_node(const Context &ctx, const std::string &path);

// "<prefix><N>" -> N, N decimal without a leading zero, at most `max_digits` digits, below `limit`;
// nullopt for any other name. The numbers of device node names (card1, channel12, 195:0).
std::optional<unsigned> numbered_name(std::string_view name, std::string_view prefix, std::size_t max_digits,
				      unsigned limit = UINT_MAX);

}  // namespace unbounded
