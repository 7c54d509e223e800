// One run of the reloader: compare the source with the records, wait a jitter, apply, check again.
#include "license_reload.hpp"

#include "format.hpp"
#include "log.hpp"

namespace unbounded {

using namespace reload_records;

namespace {

constexpr unsigned MAX_ROUNDS = 5;  // re-checks of a source that keeps changing

}  // namespace

const char *outcome_name(ReloadOutcome o)
{
	switch (o) {
	case ReloadOutcome::Disabled: return "disabled";
	case ReloadOutcome::NoSource: return "no-source";
	case ReloadOutcome::Unchanged: return "unchanged";
	case ReloadOutcome::Recorded: return "recorded";
	case ReloadOutcome::KnownBad: return "known-bad";
	case ReloadOutcome::Applied: return "applied";
	case ReloadOutcome::RolledBack: return "rolled-back";
	case ReloadOutcome::Failed: return "failed";
	case ReloadOutcome::Interrupted: return "interrupted";
	case ReloadOutcome::Installed: return "installed";
	case ReloadOutcome::Verified: return "verified";
	case ReloadOutcome::RebootRequired: return "reboot-required";
	}
	return "?";
}

LicenseReloader::LicenseReloader(const Context &ctx, UnitManager &units, ReloadSeams seams)
	: ctx_(ctx), units_(units), seams_(std::move(seams)), items_(license_items(ctx.config.licensing))
{
}

void LicenseReloader::note(ReloadReport &r, std::string msg) const
{
	log::info(msg);
	r.messages.push_back(std::move(msg));
}

// What every run (path, timer, boot) does first: nothing when switched off; the state directory; the
// installed files' owner and mode. Then `body`, which fills the report in.
Result<ReloadReport> LicenseReloader::prepared(Body body)
{
	ReloadReport report;
	if (!ctx_.config.licensing.auto_reload) {
		report.outcome = ReloadOutcome::Disabled;
		note(report, "License auto-reload is switched off (VGPU_LICENSE_AUTO_RELOAD / licensing.auto_reload).");
		return report;
	}
	if (auto r = fs::mkdir_p(ctx_.real(ctx_.config.licensing.state_dir), 0700); !r)
		return fail(r.error());
	enforce_target_attributes(report);
	if (auto r = (this->*body)(report); !r)
		return fail(r.error());
	return report;
}

// Content that failed before: not retried until it changes. A run killed while rolling back (the
// files on disk are not the last known good) finishes the rollback.
Result<void> LicenseReloader::known_bad(ReloadReport &report, const LicenseSet &source, const std::optional<LicenseSet> &applied,
					bool unverified, bool set_outcome)
{
	if (unverified && applied && read_targets() != *applied)
		return roll_back(report, *applied, source);
	if (unverified && applied) {
		auto unfinished = rollback_unfinished();
		if (!unfinished)
			return fail(unfinished.error());
		if (*unfinished) {
			note(report, "A rollback to the last known good licensing files was interrupted before nvidia-gridd ran with them; "
				     "restarting it.");
			return restart_with_good(report);
		}
	}
	if (auto r = write_state(RESTARTING, std::nullopt); !r)
		return r;
	if (set_outcome)
		report.outcome = ReloadOutcome::KnownBad;
	note(report, "These licensing files failed before (nvidia-gridd did not stay up); not retrying until they change.");
	return {};
}

// Whether `source` asks for another FeatureType than the driver holds a license for on this boot of
// the host: then nvidia-gridd restarted with it would not license the new feature (feature_type.hpp),
// so the files and nvidia-gridd are left as they are, and the report says what waits for the reboot.
bool LicenseReloader::held_for_reboot(ReloadReport &report, const LicenseSet &source, bool set_outcome) const
{
	const auto conf = source.files.find("gridd.conf");
	if (!seams_.licensed_feature || conf == source.files.end())
		return false;
	const int requested = gridd_feature_type(conf->second);
	const auto licensed = seams_.licensed_feature();
	if (!licensed || !feature_waits_for_reboot(*licensed, requested))
		return false;
	report.held_back = FeatureChange{requested, *licensed};
	if (set_outcome)
		report.outcome = ReloadOutcome::RebootRequired;
	// Said at warning level once per change (the metrics' record); each run only for debugging.
	std::string msg = "The licensing files ask for " + feature_type_text(requested) + ", but this host's driver holds a license for " +
			  feature_type_text(*licensed) + " until the host restarts; " + ctx_.config.licensing.gridd_unit +
			  " keeps running with the installed files, which apply once the host has rebooted.";
	log::debug(msg);
	report.messages.push_back(std::move(msg));
	return true;
}

// `set` waits for the host's reboot: nothing of it is installed. A restart of ours that was
// interrupted is finished with the files nvidia-gridd last ran with, so it is never left stopped.
Result<bool> LicenseReloader::kept_for_reboot(ReloadReport &report, const LicenseSet &set, const std::optional<LicenseSet> &applied,
					      bool unverified, bool set_outcome)
{
	if (!held_for_reboot(report, set, set_outcome))
		return false;
	if (unverified) {
		const LicenseSet running = applied ? *applied : read_targets();
		const ReloadOutcome held = report.outcome;
		auto r = apply_set(report, running, running, true);
		if (!r)
			return fail(r.error());
		if (report.outcome == ReloadOutcome::Applied)
			report.outcome = held;
	}
	return true;
}

// Sleeps a random share of licensing.jitter; false when stopped meanwhile (nothing changed yet).
bool LicenseReloader::sleep_jitter(ReloadReport &report, const LicenseSet &source, bool unverified)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	report.jitter = Millis(lic.jitter.count() > 0
				       ? static_cast<Millis::rep>(seams_.random_below(static_cast<std::uint64_t>(lic.jitter.count()) + 1))
				       : 0);
	const std::string what = unverified ? "A restart of " + lic.gridd_unit + " was interrupted before it was judged; restarting with "
					    : std::string("Licensing files changed; applying ");
	note(report, what + "(" + source.names() + ") after a jitter of " + format_duration(report.jitter) + ".");
	seams_.sleep(report.jitter);
	if (!seams_.stop_requested())
		return true;
	report.outcome = report.applied ? report.outcome : ReloadOutcome::Interrupted;
	note(report, "Stopped during the jitter, nothing changed.");
	return false;
}

// Whether a restart of ours was interrupted before it was judged. One judged good records its files
// as applied before it clears its own record: killed between the two, it is over, and a second
// restart for the same files would be no rotation's.
Result<bool> LicenseReloader::restart_unjudged(const std::optional<LicenseSet> &applied) const
{
	auto restarting = read_state(RESTARTING);
	if (!restarting)
		return fail(restarting.error());
	if (!*restarting)
		return false;
	// Not over when the files on disk are not those: a resumed restart that put the applied files
	// back records them as under way too, and killed while installing them it leaves half a pair.
	if (!applied || *applied != **restarting || read_targets() != *applied)
		return true;
	if (auto r = write_state(RESTARTING, std::nullopt); !r)
		return fail(r.error());
	return false;
}

// One round of run(): Done ends the run (report.outcome says how), Again checks the source once more
// (a first record was made, or a set was applied and a rotation may have landed meanwhile).
Result<LicenseReloader::Round> LicenseReloader::run_round(ReloadReport &report, unsigned round, bool decided)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	const auto first = [&](ReloadOutcome o) { report.outcome = round == 0 && !decided ? o : report.outcome; };
	auto source = read_source();
	if (!source)
		return fail(source.error());
	if (source->empty()) {
		first(ReloadOutcome::NoSource);
		if (round == 0)
			note(report, "No licensing files in " + lic.source_dir + " or the legacy paths, nothing to do.");
		return Round::Done;
	}
	auto applied = read_state(APPLIED);
	if (!applied)
		return fail(applied.error());
	// A run killed in the middle of a restart (or stopped by a shutdown) leaves the installed
	// files unverified: nothing is taken for granted until a restart has been judged.
	auto unverified = restart_unjudged(*applied);
	if (!unverified)
		return fail(unverified.error());
	if (!*unverified && *applied && **applied == *source) {
		if (round == 0) {
			first(ReloadOutcome::Unchanged);
			note(report, "Licensing files unchanged since they were last applied.");
		}
		return Round::Done;
	}
	auto failed = read_state(FAILED);
	if (!failed)
		return fail(failed.error());
	// First run (on a machine set up before the reloader): nvidia-gridd started with the
	// installed files, so when they are the source's, record them and restart nothing; never
	// content that failed before.
	if (!*unverified && !*applied && read_targets() == *source && !(*failed && **failed == *source)) {
		if (auto r = write_state(APPLIED, *source); !r)
			return fail(r.error());
		first(ReloadOutcome::Recorded);
		note(report, "Recorded the installed licensing files (" + source->names() + ") as the applied ones.");
		return Round::Again;
	}
	if (*failed && **failed == *source) {
		if (auto r = known_bad(report, *source, *applied, *unverified, round == 0 && !decided); !r)
			return fail(r.error());
		return Round::Done;
	}
	return apply_change(report, *source, *applied, *unverified, round == 0 && !decided);
}

// A change of `source` from what was applied: unless it waits for the host's reboot, a random share
// of the jitter, so a cluster-wide rotation does not reach the license server in one burst; then
// what the source holds after the wait is installed and nvidia-gridd restarted with it.
Result<LicenseReloader::Round> LicenseReloader::apply_change(ReloadReport &report, const LicenseSet &source,
							     const std::optional<LicenseSet> &applied, bool unverified, bool set_outcome)
{
	if (auto kept = kept_for_reboot(report, source, applied, unverified, set_outcome); !kept)
		return fail(kept.error());
	else if (*kept)
		return Round::Done;
	if (!sleep_jitter(report, source, unverified))
		return Round::Done;
	auto latest = read_source();
	if (!latest)
		return fail(latest.error());
	if (latest->empty() || (!unverified && applied && *applied == *latest))
		return Round::Again;
	if (*latest != source) {  // rotated again during the jitter: the hold is judged on what is applied
		if (auto kept = kept_for_reboot(report, *latest, applied, unverified, set_outcome); !kept)
			return fail(kept.error());
		else if (*kept)
			return Round::Done;
	}

	// From here on a restart runs to its end, SIGTERM or not: nvidia-gridd is never left stopped.
	// The last known good is what nvidia-gridd runs with, unless an interrupted restart left
	// unverified files: then it is the last applied record.
	const LicenseSet running = unverified && applied ? *applied : read_targets();
	auto applied_now = apply_set(report, *latest, running, unverified);
	if (!applied_now)
		return fail(applied_now.error());
	return *applied_now ? Round::Again : Round::Done;  // again: a rotation may have landed meanwhile
}

Result<ReloadReport> LicenseReloader::run() { return prepared(&LicenseReloader::reload_rounds); }

Result<void> LicenseReloader::reload_rounds(ReloadReport &report)
{
	auto decided = check_boot_install(report);
	if (!decided)
		return fail(decided.error());
	for (unsigned round = 0; round < MAX_ROUNDS; round++) {
		auto r = run_round(report, round, *decided);
		if (!r)
			return fail(r.error());
		if (*r == Round::Done)
			return {};
	}
	return {};
}

}  // namespace unbounded
