// The commands of unbounded-nvidia-setup. Each fills a Report and returns the exit code.
#pragma once

#include "cdi_state.hpp"
#include "context.hpp"
#include "driver_root.hpp"
#include "report.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

int run_setup(const Context &ctx, Report &report);
int run_refresh(const Context &ctx, Report &report);
int run_cleanup(const Context &ctx, Report &report);
int run_verify(const Context &ctx, Report &report);
int run_generate_cdi(const Context &ctx, Report &report, const std::string &output);

// The checks of `verify`, shared with the last step of `setup`: the driver root against its
// manifest and the kernel module, and our CDI spec (valid, every hostPath present, not stale).
// `known` carries what setup has just computed (the manifest and the spec for the current devices),
// which the checks then use instead of deriving them again; the files are still read and compared.
struct KnownState {
	const Manifest *manifest = nullptr;
	const SpecForState *cdi = nullptr;
	bool root_checked = false;  // the root was kept unchanged after passing the same check in this run
};
std::vector<Problem> check_live_state(const Context &ctx, Report &report, const KnownState *known = nullptr);

// The device plugin's spec, when it exists, against the live driver version: one problem that names
// the device plugin and says what to do. It is written by a pod, which needs containerd: setup and
// refresh only warn about it (failing them would keep containerd, and so the plugin, from starting).
std::optional<Problem> check_device_plugin(const Context &ctx, const std::string &driver_version);

// Whether containerd will give pods our devices (CDI on, a cdiVersion it accepts, no spec shadowing
// ours) and the DRA driver's claim specs: details and metrics counts into the report, each finding
// logged with its MESSAGE_ID. For verify, returns the findings that make it not ready (already
// logged) and adds the rest to the warnings; setup and refresh get none back.
std::vector<Problem> record_consumer(const Context &ctx, Report &report, bool verify);

}  // namespace unbounded
