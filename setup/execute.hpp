// The executor: the only code of the setup program that writes. A run of setup or
// refresh reads the machine once (snapshot.hpp) and discovers the driver without writing, plans
// without touching the file system (driver_root.hpp's plan_manifest, cdi_state.hpp's plan_specs),
// and then calls these, in this order:
//   open_run_dir, save_memos, reclaim_stale_trees (only when the copies might not fit, or the live
//   root is kept and no build would reclaim them),
//   install_root, the specs and their /dev/char links (execute_specs.hpp), record_driver_generation,
//   record_status, record_metrics.
// Every other file of setup/ writes nothing (tests/unit/test_write_sites.py holds them to it) but
// self-repair's, which keeps its own record (held-back.json, self_repair.hpp) where it reads it;
// the primitives below are lib/'s (core/fs, driver/driver_root_install, cdi/dev_char, ...). The one
// file the flow makes itself is the run lock's (lock.hpp), taken before the snapshot.
#pragma once

#include "cdi_state.hpp"
#include "context.hpp"
#include "driver_root.hpp"
#include "report.hpp"
#include "staged_driver.hpp"
#include "unique_fd.hpp"

#include <optional>
#include <string>

namespace unbounded {

// /run/unbounded-nvidia, made when missing and trusted only when root's and private (fs.hpp).
Result<UniqueFd> open_run_dir(const Context &ctx);

// What discovery and the devices' read learnt (the discovery memo, what the hook can do), kept in
// the run directory for the next run. Never fails a run: a memo not saved costs the reads again.
void save_memos(int run_dir, const MachineDevices &machine, std::optional<DiscoveryCache> discovery_memo);

// The temp and old trees a killed run left beside the root, removed early so that their space counts
// as free for the optional files, or by a run that keeps the root (driver_root.hpp's
// remove_stale_temp_trees).
Result<InstallStats> reclaim_stale_trees(const RootLocation &root);

// The root for `plan` built beside the live one and swapped in, or kept when it is unchanged
// (driver_root.hpp's install_driver_root); `previous` holds the old tree until the spec is in.
Result<InstallStats> install_root(const DriverSet &driver, const Manifest &plan, const RootLocation &root,
				  std::optional<PreviousRoot> &previous, const std::optional<std::string> &live_manifest_text);

// generate-cdi's spec at `output` (a path of the caller's, not the machine's).
Result<fs::WriteOutcome> write_generated_spec(const std::string &output, const std::string &yaml);

// cleanup's removal of a spec of ours (spec_marker.hpp); false when there was none of ours.
Result<bool> remove_spec_of_ours(const Context &ctx, const std::string &path);

// The generation of what the GPU consumers see (lib/consumer/driver_generation.hpp), in the run
// directory.
Result<void> record_driver_generation(int run_dir, const std::string &json);
// status.json in the run directory: the host's reconcile loop and verify read the last run's result.
void record_status(const Context &ctx, const Report &report);

// The run as metrics for node_exporter's textfile collector (metrics_report.hpp).
void record_metrics(const Context &ctx, const Report &report, double duration_seconds, std::size_t held_back_units);

}  // namespace unbounded
