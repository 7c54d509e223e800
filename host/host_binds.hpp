// `unbounded-nvidia-host binds MACHINE`: what a host gives one GPU machine, found from what the host
// really has. The driver's directories come from the machine's own discovery (lib/driver), run here
// over the host directories each host family installs the driver into, with the loaded module's
// version choosing; the smallest subset that still yields the same driver files and no new warning
// is what gets bound at /run/host-nvidia/<N>. The device nodes, the MIG/IMEX caps directories, the
// daemons' socket directories and the licensing directory follow the machine's device inventory
// (lib/cdi/devices.hpp) read on the host.
#pragma once

#include "context.hpp"
#include "credentials.hpp"
#include "error.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {
struct DeviceInventory;  // devices.hpp
}

namespace unbounded::host {

// A line of a .nspawn file that `binds` owns: "[Files]" "BindReadOnly" "/usr/lib/x86_64-linux-gnu:/run/host-nvidia/0".
struct SettingLine {
	std::string section;  // "Files" or "Exec"
	std::string key;
	std::string value;
	std::string text() const { return key + "=" + value; }
	bool operator==(const SettingLine &) const = default;
};

struct BindsOptions {
	std::string machine;
	std::vector<std::string> gpus;         // --gpus: indices, UUIDs or PCI addresses; empty: every GPU
	std::optional<std::string> licensing;  // --licensing DIR: bound read-only at /run/host-nvidia-licensing
	bool credentials = false;              // --credentials: expected_gpus and gpus as host settings
	std::optional<std::string> enabled;    // --enabled=yes|no|auto: the kill switch, as a host setting
	bool nvoptix = true;                   // --no-optix: leave OptiX's data out, as the machine's `nvoptix: false`
};

struct HostBinds {
	std::string driver_version;
	std::vector<std::string> staging;       // host directories, bound at /run/host-nvidia/<index>
	std::vector<SettingLine> nspawn;        // every line `binds` owns in MACHINE.nspawn, in file order
	std::vector<std::string> device_allow;  // the drop-in's DeviceAllow= values
	// The machine's settings (name "unbounded-nvidia.KEY" -> value), files of its settings directory,
	// bound read-only at /run/host-nvidia-settings; empty: no settings, no bind.
	std::vector<std::pair<std::string, std::string>> settings;
	std::vector<std::string> warnings;         // what the machine will still warn about (the host lacks it)
	std::vector<std::string> device_warnings;  // nodes of this host that the machine will not take
	std::vector<std::string> notes;            // how the directories were chosen
};

// `devices`: this host's devices when the caller has read them already (the preflight, so that its
// findings and the plan are of one reading); read here when null.
Result<HostBinds> plan_binds(const Context &ctx, const BindsOptions &opt, const DeviceInventory *devices = nullptr);

// systemd's rule for machine names (hostname_is_valid()): dot-separated labels of letters, digits and
// '-', no label empty or starting or ending with '-', at most 64 characters; ".host" is not a machine.
bool valid_machine_name(std::string_view name);

// The host directory holding MACHINE's settings, bound at /run/host-nvidia-settings in it.
std::string settings_dir(const std::string &machine);
inline constexpr const char *SETTINGS_MOUNT = HOST_SETTINGS_DIR;  // where the machine reads them

// The drop-in's text: [Service] with one DeviceAllow= per node or major.
std::string device_allow_dropin(const HostBinds &b);

}  // namespace unbounded::host
