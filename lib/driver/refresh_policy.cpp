#include "refresh_policy.hpp"

#include "kernel_module.hpp"

namespace unbounded {

DriverDecision decide_driver(const DriverWitnesses &w)
{
	DriverDecision d;
	auto live = [&]() -> const std::optional<std::string> & {
		if (!d.live && w.live)
			d.live = w.live();
		return d.live;
	};

	if (!w.staging_present) {
		if (live()) {
			d.action = DriverAction::KeepStagingGone;
			d.message = "The host's staging mounts are gone (" + w.staging_error + "): keeping driver root " + *d.live +
				    "; not ready until the host stages a driver again";
		} else {
			d.message = w.staging_error;
		}
		return d;
	}

	if (!w.staged) {
		// Mid-upgrade (libcuda and libnvidia-ml of different versions) or broken: the live root is
		// still right if it is the module's.
		if (w.keep_when_unsure && live() && (!w.module || *w.module == *d.live)) {
			d.action = DriverAction::KeepStagingInconsistent;
			d.message = w.staging_error + ": keeping driver root " + *d.live + ", trying again on the next change";
		} else {
			d.message = w.staging_error;
		}
		return d;
	}

	if (w.module && *w.module != *w.staged) {
		if (live() == w.module) {
			d.action = DriverAction::KeepPendingHostReboot;
			d.message = "Host staged driver " + *w.staged + " but the loaded kernel module is " + *w.module +
				    ": keeping driver root " + *w.module + " until the host reboots";
		} else {
			d.message = "Driver version mismatch: kernel module " + *w.module + " (" + PROC_DRIVER_VERSION +
				    ") but userspace " + (w.staged_where.empty() ? *w.staged : w.staged_where);
		}
		return d;
	}

	if (!w.module) {
		// Without the authority, a working root is never swapped for another version: that version
		// might not be the module's. A machine start (fresh /run) builds from staging.
		if (w.keep_when_unsure && live() && *d.live != *w.staged) {
			d.action = DriverAction::KeepPendingHostReboot;
			d.message = "Host staged driver " + *w.staged + " and the kernel module version is unknown (" +
				    w.module_unknown_reason + "): keeping driver root " + *d.live + " until the machine restarts";
			return d;
		}
		d.warning = "Kernel module version unknown (" + w.module_unknown_reason + "), trusting the staged driver " + *w.staged;
	}
	d.action = DriverAction::Build;
	return d;
}

const char *outcome_name(DriverAction a)
{
	switch (a) {
	case DriverAction::Build: return "ready";
	case DriverAction::KeepPendingHostReboot: return "pending-host-reboot";
	case DriverAction::KeepStagingInconsistent: return "staging-inconsistent";
	case DriverAction::KeepStagingGone: return "staging-gone";
	case DriverAction::Fail: return "failed";
	}
	return "failed";
}

}  // namespace unbounded
