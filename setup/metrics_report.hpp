// setup's, refresh's and cleanup's result as metrics for node_exporter's textfile collector
// (unbounded-nvidia-setup.prom in metrics_dir). Never fails a run: a warning at most, and nothing
// at all when the directory does not exist (no node_exporter on this machine).
#pragma once

#include "context.hpp"
#include "report.hpp"

namespace unbounded {

// The text; the executor publishes it (execute.hpp's record_metrics). `refresh_interval_seconds`:
// the refresh timer's interval on a machine that has one (an alert's measure of a stale record), 0
// where none runs (no GPU).
// `held_back_units`: the units a failed boot setup holds back now (self_repair.hpp).
std::string setup_metrics_text(const Report &report, double now_seconds, double duration_seconds, double refresh_interval_seconds = 0,
			       double held_back_units = 0);

}  // namespace unbounded
