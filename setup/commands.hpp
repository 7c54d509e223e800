// The commands of unbounded-nvidia-setup. Each fills a Report and returns the exit code.
#pragma once

#include "cdi_state.hpp"
#include "consumer_check.hpp"
#include "context.hpp"
#include "driver_root.hpp"
#include "report.hpp"
#include "snapshot.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// boot: the setup unit's run (setup --boot): retries while the host is not ready, records what its
// failure holds back (self_repair.hpp).
int run_setup(const Context &ctx, Report &report, bool boot = false);
int run_refresh(const Context &ctx, Report &report);
int run_cleanup(const Context &ctx, Report &report);
int run_verify(const Context &ctx, Report &report);
int run_generate_cdi(const Context &ctx, Report &report, const std::string &output);

// The checks of `verify`: the driver root against its manifest and the kernel module, and our CDI
// specs (valid, every hostPath present, not stale), all as `snap` read them. `planned`: the specs
// for the live root and the devices, when both could be read.
std::vector<Problem> check_live_state(const Context &ctx, Report &report, const RunSnapshot &snap,
				      std::optional<SpecForState> &planned);

// The last step of `setup`: the same checks of what this run has just left in place: `root` (kept
// after passing them this run when `root_checked`, else just swapped in) and the specs of `cdi`,
// which it wrote or found byte for byte as they are. Nothing it wrote is read back.
std::vector<Problem> check_written_state(const Context &ctx, Report &report, const RunSnapshot &snap, const Manifest &root,
					 bool root_checked, const SpecForState &cdi);

// The device plugin's spec, when it exists, against the live driver version: one problem that names
// the device plugin and says what to do. It is written by a pod, which needs containerd: setup and
// refresh only warn about it (failing them would keep containerd, and so the plugin, from starting).
std::optional<Problem> check_device_plugin(const Context &ctx, const SpecRead &spec, const std::string &driver_version);

// Whether containerd will give pods our devices (CDI on, a cdiVersion it accepts, no spec shadowing
// ours) and the DRA driver's claim specs: details and metrics counts into the report, each finding
// logged with its MESSAGE_ID. For verify, returns the findings that make it not ready (already
// logged) and adds the rest to the warnings; setup and refresh get none back.
// `known`: our specs' bytes as the run read or wrote them (not read again).
std::vector<Problem> record_consumer(const Context &ctx, Report &report, bool verify, const KnownSpecs *known, bool ask_runtime = true);

// After a run that serves the root: the generation of what the GPU consumers see (a new one when the
// driver version or our specs changed), and unbounded-nvidia-consumers.service started when they
// have to follow it (consumers.enabled). Never fails the run: what goes wrong is a warning.
void follow_driver_generation(const Context &ctx, Report &report, int run_dir, const SpecForState &cdi,
			      const std::string &driver_version);
// verify: the consumers that have not followed the current generation, or did not come back.
std::vector<Problem> check_consumers_followed(const Context &ctx, Report &report);

}  // namespace unbounded
