// The sandbox of every service unit we generate or enable (systemd.exec(5), systemd 252): what a root
// process on every boot of every GPU machine may touch, cut down to what it needs. Kept in one place
// so `systemd-analyze security` scores and doc/how-it-works.md's Security section describe the same text.
#pragma once

#include <string>
#include <vector>

namespace unbounded::generator {

enum class SandboxProfile {
	// unbounded-nvidia-setup (setup, refresh): reads staging, /proc/driver/nvidia, the config and the
	// device nodes (stat only); writes the driver root's parent, the spec's directory and its run
	// directory; speaks sd_notify and the journal. No capability at all: everything it touches is root's.
	Setup,
	// unbounded-nvidia-license-reload (both units): also PID 1's D-Bus interface (over its private
	// socket), the other root processes in /proc (nvidia-gridd's PID), and chown/chmod of a token
	// installed with the wrong owner.
	LicenseReload,
};

// The [Service] lines (no section header) for a unit of `profile` that writes `writable_dirs`
// (absolute). Directories under /run, /etc and /var/lib are created by systemd
// (RuntimeDirectory=, ConfigurationDirectory=, StateDirectory=, preserved); any other directory must
// exist (ReadWritePaths=-). `state_mode` is the mode of the StateDirectory= ones. `if_present` are
// written only when they exist, never created or re-owned (node_exporter's textfile directory).
std::string sandbox_text(SandboxProfile profile, const std::vector<std::string> &writable_dirs, const char *state_mode = "0755",
			 const std::vector<std::string> &if_present = {});

// The two halves of sandbox_text(). The path-dependent one (ProtectSystem=strict and the writable
// directories) follows the configuration; the fixed one does not, and is what the shipped license
// units carry themselves (units/*.service.in, the same lines), so that they are sandboxed even when
// started without the generator's drop-ins, which then add only the paths.
std::string sandbox_paths_text(const std::vector<std::string> &writable_dirs, const char *state_mode = "0755",
			       const std::vector<std::string> &if_present = {});
std::string sandbox_fixed_text(SandboxProfile profile);

}  // namespace unbounded::generator
