// The license reloader's metrics for node_exporter's textfile collector
// (unbounded-nvidia-license.prom in metrics_dir): runs by outcome as counters kept across runs in
// the state directory, the last run and the last applied rotation, and whether nvidia-gridd holds a
// license (license_state.hpp), since when, until when, and for which rotation. Never fails a run.
#pragma once

#include "context.hpp"
#include "license_reload.hpp"
#include "license_state.hpp"

#include <map>
#include <string>

namespace unbounded {

struct LicenseCounters {
	std::map<std::string, double> runs;  // outcome -> runs
	double last_applied = 0;             // Unix time of the last applied rotation, 0 when none
	std::string applied_invocation;      // nvidia-gridd's invocation ID right after that rotation
	LicenseState license = LicenseState::Unknown;
	double license_since = 0;        // Unix time the state began
	double license_expiry = 0;       // Unix time, licensed with a known expiry only
	double license_rotation = 0;     // last_applied when the state is of the run that rotation started
	std::string license_invocation;  // nvidia-gridd's run the state is of
	std::string journal_cursor;      // that run's journal, derived up to here (gridd_journal.hpp)
	double host_btime = 0;           // the boot of the host the two below are of (feature_type.hpp)
	double host_uptime = 0;          // the host's uptime when last looked at
	int licensed_feature = -1;       // the FeatureType nvidia-gridd was licensed with on it, -1 none seen
	int held_feature = -1;           // a rotation's FeatureType held back for its reboot, -1 none
	HostBoot recorded_boot() const { return HostBoot{static_cast<long long>(host_btime), host_uptime}; }
	std::string serialize() const;
	static LicenseCounters parse(std::string_view text);  // unknown or damaged lines are dropped
};

// What one look at nvidia-gridd found: its run and what its journal says.
struct GriddView {
	std::string invocation_id;
	LicenseObservation observation;
	std::string journal_cursor = {};  // what the observation was derived up to (a default: older brace-inits)
};

// A license past its expiry by more than this is not held, whatever nvidia-gridd said last: the
// margin covers a clock a little apart from the license server's.
inline constexpr double LICENSE_EXPIRY_MARGIN_S = 60;

// Licensed with a known expiry that `now_seconds` is past (by the margin): unlicensed since the
// expiry, which is kept (the "(expired)" of --npd, the journal's sentence). Returns whether it turned.
bool judge_license_expiry(LicenseCounters &c, double now_seconds);

// Takes `view` into the counters; returns the state before when it changed (one journal message per
// change, never per run). A new run of nvidia-gridd that is pending starts a new pending period.
std::optional<LicenseState> apply_license_view(LicenseCounters &c, const GriddView &view, double now_seconds);

// `reload_interval_seconds`: the reloader's timer interval (an alert's measure of a stale run), 0 for none.
std::string license_metrics_text(const LicenseCounters &c, double now_seconds, double reload_interval_seconds = 0);
// Counts `outcome` in the state directory `state_fd`, takes the license state from `view` (none at
// boot: nvidia-gridd has not started), logs a state change, and writes the metrics file.
// `held`: the FeatureType the run kept back for the host's reboot (RebootRequired).
void record_license_metrics(const Context &ctx, int state_fd, ReloadOutcome outcome, const std::optional<GriddView> &view,
			    const std::optional<FeatureChange> &held = std::nullopt);

// The FeatureType licensed on this boot of the host, as recorded by earlier runs (ReloadSeams).
std::optional<int> licensed_feature_this_boot(const Context &ctx, int state_fd);
// The FeatureType of the installed gridd.conf, the one a running nvidia-gridd started with (the
// reloader starts it after installing); none when the file cannot be read.
std::optional<int> installed_feature(const Context &ctx);

// The last recorded license state, for `--npd` (node-problem-detector): read from the state directory.
LicenseCounters read_license_counters(const Context &ctx, int state_fd);

}  // namespace unbounded
