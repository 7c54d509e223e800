// The sandbox of every service unit we generate or enable (systemd.exec(5), systemd 252): what a root
// process on every boot of every GPU machine may touch, cut down to what it needs. Kept in one place
// so `systemd-analyze security` scores and doc/how-it-works.md's Security section describe the same text.
#pragma once

#include <string>
#include <vector>

namespace unbounded::generator {

// The [Service] lines (no section header) of setup's, refresh's and cleanup's units, which write
// `writable_dirs` (absolute): unbounded-nvidia-setup reads staging, /proc/driver/nvidia, the config
// and the device nodes (stat only); writes the driver root's parent, the spec's directory and its run
// directory; speaks sd_notify and the journal. No capability at all: everything it touches is root's.
// Directories under /run, /etc and /var/lib are created by systemd (RuntimeDirectory=,
// ConfigurationDirectory=, StateDirectory=, preserved); any other directory must exist
// (ReadWritePaths=-). `if_present` are written only when they exist, never created or re-owned
// (node_exporter's textfile directory).
std::string sandbox_text(const std::vector<std::string> &writable_dirs, const std::vector<std::string> &if_present);

// The path-dependent half of sandbox_text() (ProtectSystem=strict and the writable directories),
// which follows the configuration; `state_mode` is the mode of the StateDirectory= ones. The license
// units carry the rest of their sandbox themselves (units/*.service.in), so that they are sandboxed
// even when started without the generator's drop-ins, which then add only these lines.
std::string sandbox_paths_text(const std::vector<std::string> &writable_dirs, const char *state_mode,
			       const std::vector<std::string> &if_present);

}  // namespace unbounded::generator
