// Which driver may be live, decided from three witnesses: the loaded kernel module (the authority:
// containers talk to it, and a libcuda of another version fails against it), the userspace the host
// has staged, and the root that is live now. Setup and refresh both follow it; it is pure so every
// case is a unit test.
//
// The live root is a copy. When the host upgrades its userspace but the old module stays loaded (the
// normal state until the host reboots), the copy still matches the module: keeping it is what keeps
// running and new GPU pods working.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace unbounded {

enum class DriverAction {
	Build,                    // build the root for the staged driver (kept as is when unchanged)
	KeepPendingHostReboot,    // staged userspace is not the loaded module's: the live copy keeps serving
	KeepStagingInconsistent,  // staging is mid-upgrade or broken: keep the live root, try again later
	KeepStagingGone,          // the host unbound the staging mounts: keep the live root, not ready
	Fail,                     // nothing usable: not ready, everything left as it was
};

struct DriverWitnesses {
	std::optional<std::string> module;  // loaded kernel module version; nullopt when unknown
	std::string module_unknown_reason;
	bool staging_present = true;        // any usable staging tree at all
	std::optional<std::string> staged;  // consistent staged userspace version; nullopt when not
	std::string staged_where;           // where libcuda.so.<staged> was found
	std::string staging_error;          // why `staged` is nullopt
	// Version of the live root when it passes verification, nullopt when there is none or it is
	// broken. Asked only when the decision depends on it (verification reads the whole root).
	std::function<std::optional<std::string>()> live;
	// A refresh keeps a working root whenever staging cannot prove its replacement (inconsistent
	// staging, a new version with the module unknown). Setup, at boot or run by hand, is the explicit
	// rebuild: it trusts consistent staging and fails on inconsistent staging (exit 1, as any bad input).
	bool keep_when_unsure = false;
};

struct DriverDecision {
	DriverAction action = DriverAction::Fail;
	std::string message;              // one line for the log, status.json and STATUS=
	std::string warning;              // something an operator should know even on success
	std::optional<std::string> live;  // the live root's version, when it was asked for
};

DriverDecision decide_driver(const DriverWitnesses &w);

const char *outcome_name(DriverAction a);  // "pending-host-reboot", ...

}  // namespace unbounded
