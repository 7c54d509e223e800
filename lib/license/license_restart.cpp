// Restarting nvidia-gridd with new licensing files, judging whether it stayed up, and rolling back.
#include "license_reload.hpp"

#include "format.hpp"
#include "log.hpp"
#include "message_ids.hpp"

#include <cerrno>
#include <csignal>

namespace unbounded {

using namespace reload_records;

// Whether the system is going down: then a refused start job or a daemon that went down are the
// shutdown's doing, not the files'. A manager that cannot say is taken as not stopping.
bool LicenseReloader::shutting_down()
{
	auto s = units_.system_stopping();
	if (!s)
		log::warning(s.error().message);
	return s && *s;
}

// Restarts nvidia-gridd: a stop job (SIGTERM, which returns the license lease; the unit's drop-in
// forbids SIGKILL), a wait for the old process to be gone, a start job, the settle time, and a
// liveness check. Never starts a second daemon beside one that still runs. Every wait in here is
// waited out in full, SIGTERM or not: a daemon that crashes seconds after its start must not pass the
// liveness check because the settle time was cut short.
Result<LicenseReloader::Restart> LicenseReloader::restart_gridd(ReloadReport &report)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	const std::string &unit = lic.gridd_unit;
	auto before = units_.status(unit);
	if (!before)
		return fail(before.error());
	// A daemon that is not running (our killed restart's stop left it stopped, or it failed) is only
	// started: no stop job, so nothing that could SIGKILL it, whatever the unit's settings.
	const bool running = before->main_pid != 0 || before->active_state == "active" || before->active_state == "activating" ||
			     before->active_state == "reloading" || before->active_state == "deactivating";
	if (running && (before->send_sigkill || before->kill_signal != SIGTERM))
		return fail(make_error(unit + " has " + (before->send_sigkill ? "SendSIGKILL=yes" : "KillSignal other than SIGTERM") +
				       " (the 50-unbounded-nvidia.conf drop-in is missing or overridden): refusing to restart it, "
				       "a SIGKILL could leak the license lease"));
	report.restarts++;
	const std::uint32_t old_pid = before->main_pid;
	if (auto r = write_state(STOPPED_BY_US, LicenseSet{}); !r)
		return fail(r.error());
	auto stopped = running ? units_.stop(unit, lic.stop_timeout) : Result<void>{};
	// The job can finish a moment before the old process is reaped: give it a short grace.
	for (int i = 0; i < 20 && old_pid && seams_.pid_alive(old_pid); i++)
		seams_.wait(Millis(100));
	if (old_pid && seams_.pid_alive(old_pid)) {
		(void)write_state(STOPPED_BY_US, std::nullopt);  // it still runs: not stopped by us
		return fail(make_error(unit + " (PID " + std::to_string(old_pid) + ") did not exit after SIGTERM within " +
					       format_duration(lic.stop_timeout) + "; not starting a second instance" +
					       (stopped ? "" : ": " + stopped.error().message),
				       EXIT_NOT_READY, ETIMEDOUT));
	}
	if (!stopped)
		return fail(stopped.error());
	auto started = units_.start(unit, lic.stop_timeout);
	if (auto r = write_state(STOPPED_BY_US, std::nullopt); !r)
		return fail(r.error());
	if (!started) {
		log::error(started.error().message);
		return Restart::NotStarted;
	}
	seams_.wait(lic.settle_time);
	auto after = units_.status(unit);
	if (!after)
		return fail(after.error());
	return after->active_state == "active" && after->main_pid != 0 && seams_.pid_alive(after->main_pid) ? Restart::Up
													    : Restart::Down;
}

// nvidia-gridd did not stay up with `bad`: remember that, put `good` back and restart it.
Result<void> LicenseReloader::roll_back(ReloadReport &report, const LicenseSet &good, const LicenseSet &bad)
{
	log::error("nvidia-gridd did not stay up with the new licensing files; restoring the last known good ones.",
		   {{"MESSAGE_ID", message_id::LICENSE_ROLLED_BACK}});
	if (auto r = write_state(FAILED, bad); !r)
		return r;
	if (auto r = install(good, &bad); !r) {
		report.outcome = ReloadOutcome::Failed;
		log::error("Failed to restore the last known good licensing files: " + r.error().message,
			   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return write_state(RESTARTING, std::nullopt);
	}
	return restart_with_good(report);
}

// The rollback's restart, with the last known good installed: judged, and the record of a restart
// under way cleared either way (the files are the last known good, judged by this restart).
Result<void> LicenseReloader::restart_with_good(ReloadReport &report)
{
	auto again = restart_gridd(report);
	if (!again || *again != Restart::Up) {
		report.outcome = ReloadOutcome::Failed;
		log::error("nvidia-gridd is not running even with the last known good licensing files" +
				   (again ? std::string() : ": " + again.error().message),
			   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return write_state(RESTARTING, std::nullopt);
	}
	report.outcome = ReloadOutcome::RolledBack;
	report.messages.push_back("rolled back");
	log::error("Rolled back to the last known good licensing files; nvidia-gridd is running with them. "
		   "The new files are not retried until they change.",
		   {{"MESSAGE_ID", message_id::LICENSE_ROLLED_BACK}});
	return write_state(RESTARTING, std::nullopt);
}

// A rollback killed after it put the last known good back but before nvidia-gridd ran with it: the
// daemon is down (it failed with the bad files, or our stop job left it stopped). The next run must
// finish that restart, not leave it down because the files on disk are already the good ones.
Result<bool> LicenseReloader::rollback_unfinished()
{
	auto status = units_.status(ctx_.config.licensing.gridd_unit);
	if (!status)
		return fail(status.error());
	auto ours = read_state(STOPPED_BY_US);
	if (!ours)
		return fail(ours.error());
	return status->active_state == "failed" || (ours->has_value() && status->active_state == "inactive");
}

// The first half of apply_set(): the record that a restart is under way, then the files. A failure
// puts back what was there.
Result<void> LicenseReloader::install_for_restart(const LicenseSet &latest, const LicenseSet &running, bool resumed) const
{
	// What is recorded as applied is exactly these bytes, read before installing: a rotation that
	// lands from here on differs from the record and is applied by the re-check after.
	if (seams_.after_stage)
		seams_.after_stage("recorded");
	// The last known good goes on record before anything changes: a run killed in this restart or
	// its rollback leaves the next run only the records to return to. A machine set up before the
	// reloader has none yet; nvidia-gridd runs with the installed files, the first run's assumption
	// (a broken rotation killed twice used to leave its files installed with nothing to roll back to).
	// Never files not yet judged: a resumed restart's installed files are the ones under judgment.
	auto applied = read_state(APPLIED);
	if (!applied)
		return fail(applied.error());
	if (!*applied && !resumed && !running.empty() && running != latest)
		if (auto r = write_state(APPLIED, running); !r)
			return fail(r.error());
	if (auto r = write_state(RESTARTING, latest); !r)
		return fail(r.error());
	// These files replace whatever the boot install put there. Its record goes with them: a run that
	// found nvidia-gridd still activating left the boot check to the next run, which would otherwise
	// record the boot's files as applied over this rotation and restart nvidia-gridd a second time
	// for it (one rotation, two restarts, on a loaded machine).
	if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r) {
		(void)write_state(RESTARTING, std::nullopt);
		return fail(r.error());
	}
	if (auto r = install(latest, &running); !r) {
		(void)install(running, &latest);
		(void)write_state(RESTARTING, std::nullopt);
		return fail(r.error());
	}
	if (seams_.after_stage)
		seams_.after_stage("installed");
	return {};
}

// Installs `latest` and restarts nvidia-gridd with it; `running` is what to return to. Returns true
// when it was applied (the caller checks the source again), false when the run ends here (rolled
// back, failed, or stopped before the outcome was known; report.outcome says which). `resumed`: a
// restart of ours was interrupted before it was judged; a unit that failed since (those very files
// may have crashed it), or that our stop job left stopped, is started and judged. One an operator
// stopped stays stopped.
Result<bool> LicenseReloader::apply_set(ReloadReport &report, const LicenseSet &latest, const LicenseSet &running, bool resumed)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	if (auto r = install_for_restart(latest, running, resumed); !r)
		return fail(r.error());

	auto status = units_.status(lic.gridd_unit);
	if (!status)
		return fail(status.error());
	bool up = true;
	auto ours = read_state(STOPPED_BY_US);
	if (!ours)
		return fail(ours.error());
	if ((resumed && (status->active_state == "failed" || ours->has_value())) || unit_running(status->active_state)) {
		auto r = restart_gridd(report);
		if (!r) {
			// Could not even try (unsafe unit settings, a stop that did not end): put the files
			// back so the disk matches the daemon that still runs, and try again next time.
			(void)install(running, &latest);
			(void)write_state(RESTARTING, std::nullopt);
			report.outcome = ReloadOutcome::Failed;
			log::error("Failed to apply the licensing files: " + r.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
			report.messages.push_back(r.error().message);
			return false;
		}
		// The start job did not run while we are being stopped or the system goes down (a shutdown
		// refuses it, sometimes before our SIGTERM arrives), or nvidia-gridd went down with the
		// rest of a shutdown: whether these files work is unknown. They stay installed for the next
		// start and stay unverified; the next run, or the next boot's install, judges them. Nothing
		// is recorded as good or bad. (A daemon that dies while only we are stopped, with the
		// system up, is judged: that is the files' doing.)
		if ((*r == Restart::NotStarted && (seams_.stop_requested() || shutting_down())) ||
		    (*r == Restart::Down && shutting_down())) {
			report.outcome = ReloadOutcome::Interrupted;
			note(report, "Stopped while " + lic.gridd_unit + " restarted, before it could be judged; the new files stay "
									 "installed and are checked by the next run.");
			return false;
		}
		up = *r == Restart::Up;
	} else {
		note(report, lic.gridd_unit + " is not running (" + status->active_state + "); installed the files for its next start.");
	}

	if (!up) {
		// nvidia-gridd did not stay up with the new files: last known good back, restart, remember.
		if (auto r = roll_back(report, running, latest); !r)
			return fail(r.error());
		return false;
	}
	if (auto r = write_state(APPLIED, latest); !r)
		return fail(r.error());
	(void)write_state(FAILED, std::nullopt);
	(void)write_state(RESTARTING, std::nullopt);
	report.outcome = ReloadOutcome::Applied;
	report.applied++;
	log::notice("Applied rotated licensing files (" + latest.names() + ")" +
			    (status->active_state == "active" ? ", nvidia-gridd restarted and running." : "."),
		    {{"MESSAGE_ID", message_id::LICENSE_APPLIED}});
	report.messages.push_back("applied");
	return true;
}

}  // namespace unbounded
