// /dev/char/<major>:<minor> links for the device nodes our specs name. With the systemd cgroup driver
// runc hands a container's device rules to systemd as DeviceAllow=/dev/char/<major>:<minor> and skips
// each rule whose /dev/char path is missing; runc's own device program is in place until the next
// `systemctl daemon-reload`, when systemd re-applies only the rules it was given and the container
// loses its GPUs ("Failed to initialize NVML: Unknown Error"; nvidia-container-toolkit issues 48,
// 251, 932, 1227). udev makes these links on a host; an nspawn machine has no udev, and the nodes the
// host binds in get none. The toolkit's fix is `nvidia-ctk system create-dev-char-symlinks`; this is
// ours: `/dev/char/195:0 -> ../nvidia0`, for every node of every spec we write.
#pragma once

#include "context.hpp"
#include "devices.hpp"

#include <string>
#include <vector>

namespace unbounded {

struct DevCharLinks {
	std::size_t created = 0;            // made (or corrected) by this run
	std::size_t present = 0;            // already leading to their node
	std::size_t removed = 0;            // links of ours whose node went
	std::vector<std::string> warnings;  // an entry that is not ours and leads elsewhere, a failure
};

// Idempotent. An entry that is missing is made; a link of ours (a relative link to an NVIDIA node's
// name: ../nvidia*, ../dri/*, ../gdrdrv) that no longer leads to a node of that number is replaced
// atomically; anything else is never touched (a warning when it does not lead to the node). A link of
// ours in form named for a number no node of `nodes` has, whose target no longer is a character
// device of that number (a GPU taken away, a MIG instance destroyed), is removed: systemd would allow
// whatever node later takes the name. Never fails the run: a machine whose /dev cannot take the
// links still gets its specs.
DevCharLinks ensure_dev_char_links(const Context &ctx, const std::vector<DeviceNode> &nodes);

// Every node the inventory's specs name: control nodes, GPUs with their DRM nodes, MIG access nodes,
// IMEX channels, fabric devices; each number once.
std::vector<DeviceNode> spec_device_nodes(const DeviceInventory &inv);

}  // namespace unbounded
