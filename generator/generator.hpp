// unbounded-nvidia-generator: decides at every boot whether this is an NVIDIA machine and, if so, puts
// unbounded-nvidia-setup.service in front of containerd and kubelet. It only reads the config file and
// what nspawn set up before init ran, writes only into its output directory, and talks to nobody.
#pragma once

#include "config.hpp"
#include "error.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded::generator {

struct Input {
	std::string root;        // UNBOUNDED_NVIDIA_ROOT: every path read is taken relative to it (tests)
	std::string normal_dir;  // where everything goes (systemd.generator(7): use the normal dir by default)
	// $SYSTEMD_VIRTUALIZATION, which PID 1 (systemd 251 and later) passes to generators: "container:NAME"
	// or "vm:NAME"; unset on bare metal.
	std::optional<std::string> virtualization;
};

struct Decision {
	bool nvidia = false;                   // generate the setup unit and the ordering
	bool licensing = false;                // enable the license .path and .timer units
	std::vector<std::string> stale_specs;  // not an NVIDIA machine, but CDI specs of ours are there: remove them before containerd
	std::string reason;                    // one line for the log
	std::string source_path;               // SourcePath= of the generated units: the config file, or "" for none
	Config config;                         // as read (defaults when absent or unreadable)
	std::vector<std::string> warnings;     // ignored knobs, for the log
};

// Decides from the config and the machine. A config that cannot be read is reported in `config_error`
// and treated as absent: detection still decides, so a broken config fails the setup unit loudly
// (blocking containerd with the config error in its status) instead of silently skipping it.
Decision decide(const Input &in, Error *config_error);

// Writes the units, drop-ins, links and masks for a decision into in.normal_dir.
Result<std::vector<std::string>> write_outputs(const Input &in, const Decision &d);

// A path as a unit file value: `%` doubled; refused when it holds a newline or other control
// character, invalid UTF-8, surrounding spaces or a trailing backslash (systemd.syntax(7)).
Result<std::string> unit_path_value(std::string_view value);

}  // namespace unbounded::generator
