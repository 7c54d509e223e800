// The host files that give one machine what `binds` plans, and how they change: MACHINE.nspawn (the
// operator's and an agent's lines kept), the DeviceAllow= drop-in of the unit that runs the machine, and
// the machine's settings directory (bound read-only at /run/host-nvidia-settings). Every file is
// prepared before any is renamed into place, and a rename that fails puts back the ones already done:
// the machine never gets binds its device cgroup does not allow, nor settings without their binds.
#pragma once

#include "context.hpp"
#include "error.hpp"
#include "host_binds.hpp"
#include "unit_name.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded::host {

struct MachineFiles {
	std::string machine;
	std::string unit;    // the unit that runs the machine: systemd-nspawn@MACHINE.service, or --unit
	std::string nspawn;  // the settings file binds writes: /etc/systemd/nspawn/MACHINE.nspawn
	std::string base;    // the settings file nspawn reads today (its lines are kept), "" for none
	std::string base_text;
	std::string dropin;    // /etc/systemd/system/UNIT.d/50-unbounded-nvidia.conf
	std::string settings;  // the settings directory, settings_dir(MACHINE)
};

// Finds MACHINE.nspawn as systemd-nspawn does (nspawn.c load_settings()): /etc/systemd/nspawn, then
// /run/systemd/nspawn, then beside the image in /var/lib/machines. Our lines can only go into /etc's
// file, which would hide the other two: `writing` refuses, naming it, when nspawn reads one of those
// today. A file in /run is an agent's, rewritten by it; one beside the image is untrusted (nspawn
// ignores its Bind=, Capability= and network lines unless --settings=trusted), and copying it into
// /etc would make an image's own privileged lines take effect. To print or check, the file nspawn
// reads is the base.
Result<MachineFiles> locate_machine_files(const Context &ctx, const std::string &machine, const std::string &unit, bool writing);

// One file as binds wants it: its text, or nullopt for "removed" (a setting no longer given).
struct FileChange {
	std::string path;
	std::optional<std::string> text;
};

// What binds writes for `b`: the .nspawn file merged into the one nspawn reads, the drop-in, and each
// settings file (those not given any more removed).
Result<std::vector<FileChange>> planned_files(const Context &ctx, const MachineFiles &f, const HostBinds &b);

// Each line that differs between the files as they are and as planned ("missing in PATH: ...",
// "superfluous in PATH: ...", "PATH is missing", "PATH says X, binds gives Y"); empty: up to date.
std::vector<std::string> file_differences(const Context &ctx, const MachineFiles &f, const HostBinds &b);

// Writes the changes together (see above). Returns the paths written or removed. An existing file
// keeps its mode and owner.
Result<std::vector<std::string>> commit_files(const Context &ctx, const std::vector<FileChange> &changes);

}  // namespace unbounded::host
