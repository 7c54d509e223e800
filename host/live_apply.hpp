// `binds --apply`: a running machine given what its files now say without a restart. Each bind of ours
// that the machine lacks (or has from another source, or writable where it should be read-only) is
// mounted into it by systemd-machined (BindMountMachine, as `machinectl bind` does); each mount of
// ours in it that the files no longer give is unmounted in its mount namespace; a changed DeviceAllow=
// drop-in reaches the running unit by a daemon-reload (systemd re-applies every running unit's cgroup
// settings after one); then the machine's refresh runs and its result is reported.
//
// What cannot change live is named and nothing is changed live: a machine in a user namespace
// (machined refuses to bind into one), a changed [Exec] line, the kill switch (read by the generator,
// at boot), device permissions on the legacy cgroup hierarchy (a delegated payload's device cgroup
// keeps its own list there), a machine systemd-machined does not know, or one run by another unit.
// The files are written either way: a restart applies them whole.
#pragma once

#include "error.hpp"
#include "host_binds.hpp"
#include "machine_files.hpp"
#include "nspawn_settings.hpp"

#include <map>
#include <string>
#include <vector>

namespace unbounded::host {

// What the machine has mounted at one of our destinations.
struct LiveMount {
	bool same_source = false;  // the same file or directory as the bind's source on the host
	bool read_only = false;
};

struct LivePlan {
	std::vector<BindSpec> add;        // not mounted in the machine
	std::vector<BindSpec> replace;    // mounted from another source, or with the other read-only flag
	std::vector<std::string> remove;  // mounted, ours by destination, no longer given
	bool empty() const { return add.empty() && replace.empty() && remove.empty(); }
};

// `wanted`: our bind lines as the files give them; `mounted`: what the machine has at each of our
// destinations (keyed by the destination, every mount of ours in it).
LivePlan plan_live(const std::vector<BindSpec> &wanted, const std::map<std::string, LiveMount> &mounted);

struct LiveResult {
	std::string state;                  // "applied", "not-running", "not-live", "failed"
	std::vector<std::string> not_live;  // what only a restart applies
	std::vector<std::string> done;      // what was changed, one line each ("bound ...", "unmounted ...")
	std::string refresh;                // the machine's refresh: "done", or why not
	std::string error;                  // the step that failed
};

// The changes binds made (`old_text`: the settings file nspawn read before, `written`: the paths it
// wrote or removed) applied to MACHINE if it runs.
LiveResult apply_live(const MachineFiles &f, const HostBinds &b, const std::string &old_text, const std::vector<std::string> &written);

}  // namespace unbounded::host
