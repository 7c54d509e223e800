// `verify`: read-only checks of the live state, for the host's reconcile loop. Waits for a setup run
// in progress (shared lock) so it never judges a half-finished run.
#include "commands.hpp"

#include "cdi_check.hpp"
#include "cdi_state.hpp"
#include "driver_discovery.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "staging_wait.hpp"

#include <chrono>
#include <optional>
#include <sys/stat.h>

namespace unbounded {
std::vector<Problem> check_live_state(const Context &ctx, Report &report, const KnownState *known)
{
	const Config &cfg = ctx.config;
	std::vector<Problem> problems;
	Manifest manifest;
	bool manifest_is_known = false;
	if (known && known->root_checked && known->manifest) {
		manifest = *known->manifest;
		manifest_is_known = true;
	} else {
		PhaseTimer t(report, "verify_driver_root");
		problems = verify_driver_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root}, &manifest,
					      known ? known->manifest : nullptr, &manifest_is_known);
	}
	report.details["driver_root"] = cfg.driver_root;
	report.details["driver_version"] = manifest.driver_version;
	if (manifest.driver_version.empty())
		return problems;  // no usable root: nothing else can be right

	if (auto text = fs::read_file(ctx.real("/proc/driver/nvidia/version"), 64 * 1024))
		if (auto kv = parse_proc_version(*text); kv && *kv != manifest.driver_version)
			problems.push_back(Problem{"/proc/driver/nvidia/version",
						   "Kernel module is " + *kv + " but the driver root holds " + manifest.driver_version +
							   ": run setup (restart unbounded-nvidia-setup.service)"});

	PhaseTimer t(report, "verify_cdi");
	const CdiSpec *expected = nullptr;
	Result<SpecForState> state = fail(Error{});
	if (known && known->cdi && manifest_is_known) {
		expected = &known->cdi->spec;
	} else {
		state = spec_for_state(ctx, manifest);
		if (!state) {
			problems.push_back(Problem{"/dev", state.error().message});
		} else {
			expected = &state->spec;
			report.details["gpus"] = state->devices.gpus.size();
			report.details["cdi_version"] = state->spec.cdi_version;
			report.details["cdi_devices"] = state->spec.devices;
			report.details["cdi_mounts"] = state->spec.mounts;
		}
	}
	report.details["cdi_spec"] = cfg.cdi_spec;
	for (auto &p : verify_cdi_spec(ctx, cfg.cdi_spec, manifest.driver_version, expected))
		problems.push_back(std::move(p));
	report.details["device_plugin_spec"] = cfg.device_plugin_spec;
	for (auto &p : verify_device_plugin_spec(ctx, cfg.device_plugin_spec, manifest.driver_version))
		problems.push_back(std::move(p));
	return problems;
}

int run_verify(const Context &ctx, Report &report)
{
	report.command = "verify";
	std::optional<RunLock> lock;
	{
		PhaseTimer t(report, "lock");
		lock = RunLock::wait_shared(ctx.real(std::string(RUN_DIR) + "/lock"), std::chrono::minutes(2));
	}
	StagingState staging = probe_staging(ctx);
	struct stat st{};
	if (!staging.nvidia_machine && ::lstat(ctx.real(ctx.config.driver_root).c_str(), &st) < 0) {
		report.outcome = "no-gpu";
		log::info("Not an NVIDIA machine and no driver root: nothing to verify.");
		return EXIT_READY;
	}
	report.problems = check_live_state(ctx, report);
	if (report.problems.empty()) {
		report.outcome = "ready";
		log::info("Ready: driver " + report.details["driver_version"].get<std::string>() + " in " +
			  ctx.config.driver_root + ", " + ctx.config.cdi_spec + " current, every hostPath present.");
		return EXIT_READY;
	}
	report.outcome = "not-ready";
	for (const auto &p : report.problems)
		log::error("Not ready: " + p.message, {{"MESSAGE_ID", message_id::VERIFY_FAILED}, {"UNBOUNDED_NVIDIA_PATH", p.path}});
	return EXIT_NOT_READY;
}

}  // namespace unbounded
