// `unbounded-nvidia-host check`: the host's side of a working GPU machine, checked before any machine
// depends on it. Read-only. Each finding names what is wrong and where; an error means a machine given
// this host's GPUs would not be ready (or its pods would fail), a warning that some pods may.
//   pci         every display/3D-class PCI function of vendor 0x10de is bound to the nvidia driver
//   modules     nvidia, nvidia_uvm and nvidia_modeset loaded (nvidia_drm where DRM nodes exist)
//   nodes       /dev/nvidiactl, /dev/nvidia-uvm and each GPU's /dev/nvidia<minor>, of the majors /proc/devices gives
//   userspace   the userspace driver a machine would be given is the loaded module's version
//   firmware    GSP firmware of that version (required by the open kernel module)
//   persistence nvidia-persistenced running (its socket), so that the GPUs stay initialised between pods
//   fabric      the fabric manager where NVSwitches exist; the IMEX daemon where IMEX channels exist
// Everything read is bounded, opened without following the last component and without blocking.
#pragma once

#include "context.hpp"

#include <string>
#include <vector>

namespace unbounded::host {

struct Finding {
	bool error = true;  // else a warning
	std::string check;  // "pci", "modules", ...
	std::string message;
};

struct Preflight {
	std::string driver_version;  // of the loaded module, "" when none
	std::vector<Finding> findings;
	bool ready() const;
};

Preflight run_preflight(const Context &ctx);

// The most PCI functions and processes read (a real host has hundreds and thousands).
inline constexpr std::size_t MAX_PCI_FUNCTIONS = 4096;
inline constexpr std::size_t MAX_PROCESSES = 65536;

}  // namespace unbounded::host
