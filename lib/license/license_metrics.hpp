// The license reloader's metrics for node_exporter's textfile collector
// (unbounded-nvidia-license.prom in metrics_dir): runs by outcome as counters kept across runs in
// the state directory, the last run and the last applied rotation. Never fails a run.
#pragma once

#include "context.hpp"
#include "license_reload.hpp"

#include <map>
#include <string>

namespace unbounded {

struct LicenseCounters {
	std::map<std::string, double> runs;  // outcome -> runs
	double last_applied = 0;             // Unix time of the last applied rotation, 0 when none
	std::string serialize() const;
	static LicenseCounters parse(std::string_view text);  // unknown or damaged lines are dropped
};

std::string license_metrics_text(const LicenseCounters &c, double now_seconds);
// Counts `outcome` in the state directory `state_fd` and writes the metrics file.
void record_license_metrics(const Context &ctx, int state_fd, ReloadOutcome outcome);

}  // namespace unbounded
