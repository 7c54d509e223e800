// `binds --apply`: a running machine given what its files now say without a restart. Each bind of ours
// that the machine lacks (or has from another source, or writable where it should be read-only) is
// mounted into it by systemd-machined (BindMountMachine, as `machinectl bind` does); each mount of
// ours in it that the files no longer give is unmounted in its mount namespace; a changed DeviceAllow=
// drop-in reaches the running unit by a daemon-reload (systemd re-applies every running unit's cgroup
// settings after one); then the machine's refresh runs and its result is reported.
//
// Everything is asked before anything changes: what cannot change live is named and then nothing is
// written or changed (the settings directory is bound live, so even the files would be half of it): a
// machine in a user namespace (machined binds into none), the kill switch set where the machine has its
// setup unit (the generator decides at boot), a machine that booted without one, a device change on the
// legacy cgroup hierarchy (a delegated payload's device cgroup keeps its own list), a GPU node to be
// taken away that a process of the machine holds open, a machine systemd-machined does not know, or
// one another unit runs. A machine that does not run gets the files.
#pragma once

#include "error.hpp"
#include "host_binds.hpp"
#include "machine_files.hpp"
#include "nspawn_settings.hpp"

#include <functional>
#include <map>
#include <optional>
#include <sys/types.h>
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

// Which of `pids` holds the character device `node` open (a pod's CUDA program holding a GPU that
// is to be taken away), if any.
std::optional<pid_t> process_holding(const std::vector<pid_t> &pids, const std::string &node);

struct LiveResult {
	std::string state;                  // "applied", "not-running", "not-live", "failed"
	std::vector<std::string> written;   // the files written or removed (none when not live)
	std::vector<std::string> not_live;  // what only a restart applies
	std::vector<std::string> done;      // what was changed, one line each ("bound ...", "unmounted ...")
	std::string refresh;                // the machine's refresh: "done", or why not
	std::string error;                  // the step that failed
};

// Writes the files (binds' commit, returning the paths written or removed).
using Commit = std::function<Result<std::vector<std::string>>()>;

// binds' change to MACHINE's files, applied to it live if it runs (see above), or written for its
// next start if it does not.
LiveResult apply_live(const MachineFiles &f, const HostBinds &b, const Commit &commit);

}  // namespace unbounded::host
