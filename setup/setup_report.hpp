// What setup and refresh say: into the report (status.json, --json, the metrics), the journal (with
// MESSAGE_IDs) and systemd's STATUS=. The flow (setup_command.cpp) decides; these say it.
#pragma once

#include "cdi_state.hpp"
#include "context.hpp"
#include "driver_root.hpp"
#include "optional_fit.hpp"
#include "report.hpp"
#include "spec_read.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace unbounded {

// The run failed with `e`: everything was left as it was. Returns the exit code.
int finish_failed(const Context &ctx, Report &report, const Error &e);
// Setup's own checks found report.problems. Returns the exit code.
int finish_not_ready(Report &report);
// The last word of a run that built (or kept unchanged) the root. Returns the exit code.
int finish_ready(const Context &ctx, Report &report, const DriverSet &driver, const InstallStats &stats, const SpecForState &cdi,
		 std::chrono::steady_clock::time_point total_start);

// Each warning into the journal and the report.
void warn(Report &report, const std::vector<std::string> &warnings);
// The device plugin's spec is reported, never fatal: see check_device_plugin().
void warn_about_device_plugin(const Context &ctx, Report &report, const SpecRead &spec, const std::string &version);
// What the devices say, and the GPUs the machine offers beside expected_gpus.
void warn_about_devices(const Context &ctx, Report &report, const DeviceInventory &devices);
// The optional files left out of the plan (optional_fit.hpp).
void record_left_out(Report &report, std::vector<LeftOut> left);
// What the install did.
void record_install(const Context &ctx, Report &report, const InstallStats &stats);

// Says in the journal how many temporary trees a killed run left that this run removed (none: nothing).
void note_stale_trees_removed(std::size_t removed);

}  // namespace unbounded
