// At boot: the source's files installed before nvidia-gridd's first start, and the next run's check
// that it came up with them.
#include "license_reload.hpp"

#include "log.hpp"
#include "message_ids.hpp"

namespace unbounded {

using namespace reload_records;

// Files installed at boot were read by nvidia-gridd's first start: they need a liveness check, not a
// restart. Returns whether it decided something (the run's outcome).
Result<bool> LicenseReloader::check_boot_install(ReloadReport &report)
{
	auto boot = read_state(BOOT_INSTALLED);
	if (!boot)
		return fail(boot.error());
	if (!*boot)
		return false;
	const LicensingConfig &lic = ctx_.config.licensing;
	auto status = units_.status(lic.gridd_unit);
	if (!status)
		return fail(status.error());
	const std::string &state = status->active_state;
	if (state == "activating" || state == "reloading" || state == "deactivating") {
		note(report, lic.gridd_unit + " is " + state + "; the licensing files installed at boot are checked by the next run.");
		return false;
	}
	const bool up = state == "active" && status->main_pid != 0 && seams_.pid_alive(status->main_pid);
	if (up || state == "inactive") {
		if (auto r = write_state(APPLIED, **boot); !r)
			return fail(r.error());
		if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r)
			return fail(r.error());
		report.outcome = ReloadOutcome::Verified;
		note(report, up ? lic.gridd_unit + " started with the licensing files installed at boot (" + (*boot)->names() +
					     ") and is running; recorded them as applied."
				: lic.gridd_unit + " is not running; the licensing files installed at boot are recorded for its next start.");
		return true;
	}
	// It did not come up with them.
	auto applied = read_state(APPLIED);
	if (!applied)
		return fail(applied.error());
	if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r)
		return fail(r.error());
	if (*applied && **applied != **boot) {
		if (auto r = roll_back(report, **applied, **boot); !r)
			return fail(r.error());
		return true;
	}
	if (auto r = write_state(FAILED, **boot); !r)
		return fail(r.error());
	report.outcome = ReloadOutcome::Failed;
	log::error(lic.gridd_unit + " is " + state + " with the licensing files installed at boot, and there are no last known good "
						     "ones to return to; not retrying these files until they change.",
		   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
	return true;
}

Result<ReloadReport> LicenseReloader::install_at_boot() { return prepared(&LicenseReloader::install_boot_files); }

Result<void> LicenseReloader::install_boot_files(ReloadReport &report)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	auto source = read_source();
	if (!source)
		return fail(source.error());
	if (source->empty()) {
		report.outcome = ReloadOutcome::NoSource;
		note(report, "No licensing files in " + lic.source_dir + " or the legacy paths, nothing to install.");
		return {};
	}
	auto applied = read_state(APPLIED);
	auto failed = read_state(FAILED);
	auto restarting = read_state(RESTARTING);
	for (const auto *r : {&applied, &failed, &restarting})
		if (!*r)
			return fail(r->error());
	const LicenseSet targets = read_targets();
	LicenseSet want = *source;
	if (*failed && **failed == *source) {
		// A config after which nvidia-gridd did not stay up: it starts with the last known good.
		want = *applied ? **applied : targets;
		if (!*applied && want == **failed) {
			// No last known good, and the failed files still installed: nvidia-gridd starts with
			// them as they are. Not recorded as installed at boot, so that the next run neither
			// checks them nor takes a start that happens to stay up for a verdict that they work.
			report.outcome = ReloadOutcome::KnownBad;
			note(report, "The licensing files in the source failed before and there are no last known good ones; " + lic.gridd_unit +
					     " starts with them as installed; they stay known bad until the source changes.");
			return {};
		}
		note(report, "The licensing files in the source failed before; " + lic.gridd_unit + " starts with the last known good ones.");
	}
	// nvidia-gridd starts with what is installed when the source's FeatureType must wait for the host;
	// those files are then judged as any installed at boot.
	const bool held = !targets.empty() && targets != want && held_for_reboot(report, want, true);
	if (held)
		want = targets;
	if (targets == want && *applied && **applied == want && !*restarting) {
		if (!held) {
			report.outcome = ReloadOutcome::Unchanged;
			note(report, "Licensing files already installed and applied.");
		}
		return {};
	}
	if (want.empty())
		return {};
	if (targets != want)
		if (auto r = install(want, &targets); !r)
			return fail(r.error());
	if (auto r = write_state(BOOT_INSTALLED, want); !r)
		return fail(r.error());
	if (auto r = write_state(RESTARTING, std::nullopt); !r)
		return fail(r.error());
	report.outcome = held ? ReloadOutcome::RebootRequired : ReloadOutcome::Installed;
	log::notice((targets != want ? "Installed the licensing files (" : "The installed licensing files (") + want.names() +
		    ") are what " + lic.gridd_unit + " starts with; the next reload run checks that it came up with them.");
	report.messages.push_back("installed");
	return {};
}

}  // namespace unbounded
