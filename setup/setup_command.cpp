// `setup` and `refresh`: lock, (wait for staging,) read the machine once (snapshot.hpp), discover,
// decide with the kernel module which driver may be live (refresh_policy.hpp), build and swap the
// driver root or keep the live one, write the CDI spec (execute_specs.hpp), check what was written,
// record the result (setup_report.hpp). Any failure leaves the previous driver root exactly as it was.
// `refresh` (refresh_command.cpp) runs the same, after staging has settled.
#include "setup_flow.hpp"

#include "commands.hpp"

#include "cdi_state.hpp"
#include "driver_root.hpp"
#include "execute.hpp"
#include "format.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "sd_protocols.hpp"
#include "optional_fit.hpp"
#include "refresh_policy.hpp"
#include "self_repair.hpp"
#include "setup_report.hpp"
#include "snapshot.hpp"
#include "execute_specs.hpp"
#include "staged_driver.hpp"
#include "staging_wait.hpp"

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace unbounded {
namespace {

// After a build, the new root's old tree is held until its spec is in (write_spec_after_swap).
struct Swap {
	std::optional<PreviousRoot> &previous;
	InstallStats &stats;
};

// The tail of both ways a run serves a root (kept, or built and swapped in with `swap`): its spec
// written, what was written checked, the device plugin's spec warned about. Returns the exit code
// when the run ends here, nullopt when it goes on to its last word.
std::optional<int> serve_spec(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi,
			      const Manifest &root, Swap *swap, int run_dir)
{
	if (swap) {
		if (auto r = write_spec_after_swap(ctx, report, snap, cdi, swap->previous, swap->stats); !r)
			return finish_failed(ctx, report, r.error());
		record_install(ctx, report, swap->stats);
	} else {
		PhaseTimer t(report, "write_cdi");
		if (auto r = check_spec_paths_hold_specs(snap); !r)
			return finish_failed(ctx, report, r.error());
		auto w = write_spec(ctx, report, snap, cdi);
		if (!w)
			return finish_failed(ctx, report, w.error());
		report.details["cdi_spec"] = ctx.config.cdi_spec;
		report.details["cdi_spec_written"] = *w == fs::WriteOutcome::Written;
		report.facts.files_changed |= *w == fs::WriteOutcome::Written;
	}
	{
		PhaseTimer t(report, "verify");
		// A kept root passed its check in this run (refresh_policy's `live`, or the install's unchanged test).
		const bool root_checked = !swap || swap->stats.unchanged;
		report.problems = check_written_state(ctx, report, snap, root, root_checked, cdi);
	}
	if (!report.problems.empty())
		return finish_not_ready(report);
	follow_driver_generation(ctx, report, run_dir, cdi, root.driver_version);
	warn_about_device_plugin(ctx, report, snap.device_plugin, root.driver_version);
	return std::nullopt;
}

// The outcome of a run that kept the live root, said.
int finish_kept(const Context &ctx, Report &report, const DriverDecision &decision, const std::string &version)
{
	const Config &cfg = ctx.config;
	report.outcome = outcome_name(decision.action);
	log::Fields fields = {{"UNBOUNDED_NVIDIA_DRIVER_VERSION", version}, {"UNBOUNDED_NVIDIA_DRIVER_ROOT", cfg.driver_root}};
	switch (decision.action) {
	case DriverAction::KeepPendingHostReboot:
		fields.push_back({"MESSAGE_ID", message_id::DRIVER_PENDING_HOST_REBOOT});
		log::notice(decision.message + ".", fields);
		break;
	case DriverAction::KeepStagingInconsistent:
		fields.push_back({"MESSAGE_ID", message_id::STAGING_INCONSISTENT});
		log::warning(decision.message + ".", fields);
		report.warnings.push_back(decision.message);
		break;
	case DriverAction::KeepStagingGone:
		fields.push_back({"MESSAGE_ID", message_id::STAGING_GONE});
		fields.push_back({"UNBOUNDED_NVIDIA_PATH", cfg.staging});
		log::error(decision.message + ".", fields);
		report.problems.push_back(Problem{cfg.staging, decision.message});
		report.error = decision.message;
		notify_status("Not ready: " + decision.message);
		return EXIT_NOT_READY;
	default:
		break;
	}
	notify_status(decision.message);
	return EXIT_READY;
}

// What the spec we serve holds, for the JSON and the metrics.
void record_spec(Report &report, const SpecForState &s)
{
	report.details["gpu_source"] = s.devices.source;
	report.details["cdi_version"] = s.spec.cdi_version;
	report.facts.cdi_devices = s.spec.devices;
	report.details["cdi_mounts"] = s.spec.mounts;
	report.details["cdi_hooks"] = s.spec.hooks;
}

// The live root stays: its spec is brought up to date for the devices there are now, and checked.
int keep_live_root(const Context &ctx, Report &report, const RunSnapshot &snap, const DriverDecision &decision, int run_dir)
{
	const Manifest &live = *snap.live.manifest();  // the decision to keep it checked it
	report.facts.driver_version = live.driver_version;
	report.details["driver_root_kept"] = true;
	// A run that keeps the root succeeds too: the trees a killed run left go now, not at the next
	// build (the stateful tier's soak found one standing in /run after a kept root's run).
	if (auto stale = reclaim_stale_trees(live_root_location(ctx)); stale && stale->stale_trees_removed) {
		warn(report, stale->warnings);
		report.details["stale_trees_removed"] = stale->stale_trees_removed;
		note_stale_trees_removed(stale->stale_trees_removed);
	}
	SpecForState cdi;
	{
		PhaseTimer t(report, "cdi");
		auto s = plan_specs(ctx.config.driver_root, live, snap.machine);
		if (!s)
			return finish_failed(ctx, report, s.error());
		cdi = std::move(*s);
		record_spec(report, cdi);  // a kept root's spec counts like a built one's (metrics, JSON)
		warn_about_devices(ctx, report, cdi.devices);
	}
	if (auto rc = serve_spec(ctx, report, snap, cdi, live, nullptr, run_dir))
		return *rc;
	return finish_kept(ctx, report, decision, live.driver_version);
}

// Optional files whose copies would not fit the driver root's file system leave the plan, and so the
// manifest and the spec (optional_fit.hpp). Only when the copies might not fit are the trees a killed
// run left removed early (their space is free by the copies' time) and the live root's files looked
// at: on a machine with room this costs one statfs().
void leave_out_optional(const RootLocation &root, Report &report, const RunSnapshot &snap, const DriverSet &driver, Manifest &plan)
{
	auto space = free_space_for(root);
	auto fits = [&] { return !space || bytes_without_reuse(plan, space->block) + space_reserve(space->total) <= space->available; };
	if (fits())
		return;
	if (auto stale = reclaim_stale_trees(root); stale && stale->stale_trees_removed) {
		warn(report, stale->warnings);
		space = free_space_for(root);
		if (fits())
			return;
	}
	if (!space)
		return;
	const Reusable reusable = reusable_in(snap.live.fd.get(), snap.live.manifest());
	record_left_out(report, leave_out_what_does_not_fit(plan, driver, reusable, *space, root.display));
}

// What the new root will contain: the plan, less the optional files that do not fit.
Result<Manifest> plan_root(const RootLocation &root, Report &report, const RunSnapshot &snap, const DriverSet &driver)
{
	PhaseTimer t(report, "plan");
	std::vector<std::string> warnings;
	auto plan = plan_manifest(driver, warnings);
	if (!plan)
		return fail(plan.error());
	warn(report, warnings);
	leave_out_optional(root, report, snap, driver, *plan);
	return plan;
}

// The spec depends only on the planned root and the devices: it is generated before anything is
// touched, so a device problem fails the run with the old root and spec untouched.
Result<SpecForState> make_spec(const Context &ctx, Report &report, const RunSnapshot &snap, const Manifest &plan)
{
	PhaseTimer t(report, "cdi");
	auto s = plan_specs(ctx.config.driver_root, plan, snap.machine);
	if (!s)
		return fail(s.error());
	record_spec(report, *s);
	return s;
}

// Builds and swaps in the root for `plan` (kept as it is when unchanged); `cdi` is made again when
// optional files leave the plan after all.
Result<InstallStats> build_and_swap(const Context &ctx, Report &report, const RunSnapshot &snap, const DriverSet &driver,
				    Manifest &plan, SpecForState &cdi, std::optional<PreviousRoot> &previous)
{
	PhaseTimer t(report, "install");
	const RootLocation root = live_root_location(ctx);
	notify_status("Building " + ctx.config.driver_root + " for driver " + driver.version);
	auto s = install_root(driver, plan, root, previous, snap.live.manifest_text);
	if (!s && s.error().errnum == ENOSPC) {
		// The file system filled up after the estimate (another writer to /run): once more
		// without the optional files that would be copied, with their spec. A failed install
		// left the old root and spec as they were.
		const Reusable reusable = reusable_in(snap.live.fd.get(), snap.live.manifest());
		auto left = leave_out_all_copied(plan, driver, reusable, ctx.config.driver_root, s.error().message);
		if (!left.empty()) {
			record_left_out(report, std::move(left));
			auto again = make_spec(ctx, report, snap, plan);
			if (!again)
				return fail(again.error());
			cdi = std::move(*again);
			s = install_root(driver, plan, root, previous, snap.live.manifest_text);
		}
	}
	if (s)
		warn(report, s->warnings);
	return s;
}

// Builds and swaps in the root for `driver` (kept as it is when unchanged), then writes its spec.
int build_root(const Context &ctx, Report &report, const RunSnapshot &snap, const DriverSet &driver,
	       std::chrono::steady_clock::time_point total_start, int run_dir)
{
	auto plan = plan_root(live_root_location(ctx), report, snap, driver);
	if (!plan)
		return finish_failed(ctx, report, plan.error());
	auto cdi = make_spec(ctx, report, snap, *plan);
	if (!cdi)
		return finish_failed(ctx, report, cdi.error());
	warn_about_devices(ctx, report, cdi->devices);
	if (auto r = check_spec_paths_hold_specs(snap); !r)
		return finish_failed(ctx, report, r.error());
	std::optional<PreviousRoot> previous;
	auto stats = build_and_swap(ctx, report, snap, driver, *plan, *cdi, previous);
	if (!stats)
		return finish_failed(ctx, report, stats.error());
	Swap swap{previous, *stats};
	if (auto rc = serve_spec(ctx, report, snap, *cdi, *plan, &swap, run_dir))
		return *rc;
	return finish_ready(ctx, report, driver, *stats, *cdi, total_start);
}

Result<RunLock> take_lock(int run_dir)
{
	return RunLock::acquire(run_dir, "lock", std::string(RUN_DIR) + "/lock", [](RunLock::Holder h) {
		const std::string what = h == RunLock::Holder::Writer ? "Another unbounded-nvidia-setup run is in progress"
								      : "unbounded-nvidia-setup verify is reading the live state";
		log::notice(what + ", waiting for it to finish.");
		notify_status(what + ", waiting");
	});
}

// At boot the host's mounts may still be on their way: setup waits for them (bounded). A refresh
// takes what is there.
Result<StagingState> staging_state(const Context &ctx, Report &report, Mode mode, const std::vector<WalkedTree> *walked)
{
	if (mode == Mode::Refresh)
		return probe_staging(ctx, walked);
	PhaseTimer t(report, "wait");
	notify_status("Waiting for the staging mounts under " + ctx.config.staging + " and /dev/nvidiactl");
	Millis waited{};
	return wait_for_staging(ctx, ctx.config.staging_timeout, &waited);
}

// What the host has staged, through the discovery memo; recorded in the report.
StagedDriver discover_step(const Context &ctx, Report &report, const StagingState &state, int run_dir, const KernelModule &module,
			   const std::vector<WalkedTree> *walked)
{
	PhaseTimer t(report, "discover");
	report.details["staging"] = state.usable;
	report.details["staging_mounts"] = state.mounts;
	StagedDriver staged;
	if (state.usable.empty())
		staged.error = make_error("No staging mounts under " + ctx.config.staging, EXIT_NOT_READY, ENOENT);
	else
		staged = discover_staged(ctx, state, run_dir, module.version, /*keep_memo=*/true, walked);
	report.details["discovery_cache_hits"] = staged.cache_hits;
	warn(report, staged.warnings);
	if (staged.driver) {
		report.facts.staged_driver_version = staged.driver->version;
		report.details["multiarch"] = staged.driver->multiarch;
		warn(report, staged.driver->warnings);
		for (const auto &n : staged.driver->notes) {
			log::notice(n + ".");
			report.notes.push_back(n);
		}
	}
	return staged;
}

// The module and staging as refresh_policy sees them (the live root is asked for lazily).
DriverWitnesses witnesses_of(const KernelModule &module, const StagingState &state, const StagedDriver &staged, Mode mode)
{
	DriverWitnesses w;
	w.module = module.version;
	w.module_unknown_reason = module.unknown_reason;
	w.staging_present = !state.usable.empty();
	w.keep_when_unsure = mode == Mode::Refresh;
	w.staging_error = staged.error.message;
	if (staged.driver) {
		w.staged = staged.driver->version;
		w.staged_where = staged.driver->libcuda_display;
	}
	return w;
}

// No staging and no /dev/nvidiactl, and no root a refresh could keep: the run ends here. Not an NVIDIA
// machine: nothing to do (EXIT_READY); one the configuration says has GPUs: the host bound nothing,
// which fails. nullopt: the run goes on.
std::optional<int> without_nvidia_binds(const Context &ctx, Report &report, const StagingState &state, Mode mode)
{
	struct stat root_st = {};
	if (state.nvidia_machine || (mode == Mode::Refresh && ::lstat(ctx.real(ctx.config.driver_root).c_str(), &root_st) == 0))
		return std::nullopt;
	if (!configured_gpu_machine(ctx.config).empty()) {
		report.host_not_ready = true;  // binds may come (machinectl bind): setup --boot tries again
		return finish_failed(ctx, report, make_error(nothing_bound_message(ctx.config), EXIT_NOT_READY, ENOENT));
	}
	report.outcome = "no-gpu";
	log::info("No staging mounts under " + ctx.config.staging + " and no /dev/nvidiactl: not an NVIDIA machine, nothing to do.",
		  {{"MESSAGE_ID", message_id::SETUP_NO_GPU}});
	notify_status("Not an NVIDIA machine, nothing to do");
	return EXIT_READY;
}

// Which driver may be live, from the snapshot and what staging holds.
DriverDecision decide(Report &report, const RunSnapshot &snap, const StagingState &state, const StagedDriver &staged, Mode mode)
{
	DriverWitnesses witnesses = witnesses_of(snap.module, state, staged, mode);
	// The live root's tree is checked only when the decision depends on it (every file is looked at).
	witnesses.live = [&]() -> std::optional<std::string> {
		PhaseTimer t(report, "check_live_root");
		if (!snap.live.check().empty() || snap.live.manifest()->driver_version.empty())
			return std::nullopt;
		return snap.live.manifest()->driver_version;
	};
	DriverDecision decision = decide_driver(witnesses);
	if (!decision.warning.empty()) {
		log::notice(decision.warning + ".");
		report.warnings.push_back(decision.warning);
	}
	return decision;
}

}  // namespace

int apply(const Context &ctx, Report &report, Mode mode, int run_dir, const std::vector<WalkedTree> *walked)
{
	const auto total_start = std::chrono::steady_clock::now();
	report.details["driver_root"] = ctx.config.driver_root;
	std::optional<RunLock> lock;
	{
		PhaseTimer t(report, "lock");
		auto l = take_lock(run_dir);
		if (!l)
			return finish_failed(ctx, report, l.error());
		lock.emplace(std::move(*l));
	}
	auto state = staging_state(ctx, report, mode, walked);
	if (!state)
		return finish_failed(ctx, report, state.error());
	if (auto rc = without_nvidia_binds(ctx, report, *state, mode))
		return *rc;

	const RunSnapshot snap = [&] {
		PhaseTimer t(report, "snapshot");
		return take_snapshot(ctx, /*learn_hook=*/true);
	}();
	report.facts.kernel_module_version = snap.module.version.value_or("");
	StagedDriver staged = discover_step(ctx, report, *state, run_dir, snap.module, walked);
	// What discovery and the hook learnt, kept for the next run before anything is decided; the
	// memo's memory goes with it.
	save_memos(run_dir, snap.machine, std::exchange(staged.memo, std::nullopt));
	const DriverDecision decision = decide(report, snap, *state, staged, mode);
	switch (decision.action) {
	case DriverAction::Build:
		report.facts.driver_version = staged.driver->version;
		return build_root(ctx, report, snap, *staged.driver, total_start, run_dir);
	case DriverAction::Fail:
		report.host_not_ready = true;
		if (!staged.driver && decision.message == staged.error.message)
			return finish_failed(ctx, report, staged.error);
		return finish_failed(ctx, report, make_error(decision.message));
	default:
		return keep_live_root(ctx, report, snap, decision, run_dir);
	}
}

int run_setup(const Context &ctx, Report &report, bool boot)
{
	report.command = "setup";
	auto run_dir = open_run_dir(ctx);
	if (!run_dir)
		return finish_failed(ctx, report, run_dir.error());
	// At boot the host may be a moment behind (its module loading after a kernel update, staging
	// half-upgraded, binds added by machinectl bind): setup --boot tries again until staging_timeout,
	// from the start, so that such a boot never fails at all. Only the last failure is said as one.
	constexpr Millis PAUSE{1000};
	const auto deadline = std::chrono::steady_clock::now() + ctx.config.staging_timeout;
	bool said = false;
	int rc;
	for (;;) {
		report.may_retry = boot && std::chrono::steady_clock::now() + PAUSE < deadline;
		rc = apply(ctx, report, Mode::Setup, run_dir->get());
		if (rc == EXIT_READY || !report.may_retry || !report.host_not_ready)
			break;
		if (!said) {
			const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
			log::notice("The host's NVIDIA driver is not ready yet (" + report.error + "): trying again for up to " +
				    format_duration(left) + " (staging_timeout).");
			said = true;
		}
		::usleep(static_cast<useconds_t>(std::chrono::duration_cast<std::chrono::microseconds>(PAUSE).count()));
		report = Report{};
		report.command = "setup";
	}
	if (boot) {
		if (rc == EXIT_READY)
			clear_held_back(ctx);  // what waited for this setup starts now: an old record is void
		else
			note_held_back(ctx, report);
	}
	return rc;
}

}  // namespace unbounded
