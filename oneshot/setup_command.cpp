// `setup` and `refresh`: lock, (wait for staging,) discover, decide with the kernel module which driver
// may be live (refresh_policy.hpp), build and swap the driver root or keep the live one, write the CDI
// spec, verify, record the result. Any failure leaves the previous driver root exactly as it was.
// `refresh` is what unbounded-nvidia-refresh.service runs while containerd keeps running: it first
// waits for staging to settle, and goes again when staging changed while it worked.
#include "commands.hpp"

#include "bounded_parse.hpp"
#include "cdi_state.hpp"
#include "dev_char.hpp"
#include "discovery_cache.hpp"
#include "driver_discovery.hpp"
#include "driver_root.hpp"
#include "format.hpp"
#include "ipc.hpp"
#include "kernel_module.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "mounts.hpp"
#include "notify.hpp"
#include "optional_fit.hpp"
#include "refresh_policy.hpp"
#include "staging.hpp"
#include "spec_marker.hpp"
#include "staged_driver.hpp"
#include "staging_quiet.hpp"
#include "staging_wait.hpp"

#include <cerrno>
#include <fcntl.h>

namespace unbounded {
namespace {

int finish_failed(const Context &ctx, Report &report, const Error &e)
{
	report.outcome = "failed";
	report.error = e.message;
	log::error("Setup failed: " + e.message,
		   {{"MESSAGE_ID", message_id::SETUP_FAILED},
		    {"ERRNO", std::to_string(e.errnum)},
		    {"UNBOUNDED_NVIDIA_DRIVER_ROOT", ctx.config.driver_root}});
	notify_status("Failed: " + e.message);
	return e.exit_code == EXIT_READY ? EXIT_NOT_READY : e.exit_code;
}

// The files at cdi_spec and the side specs' paths are replaced on every run. In a CDI spec directory such a
// file is a spec by definition (whatever a hostile writer left there is overwritten); anywhere else
// it must already be a CDI spec of its kind, so that a configured `cdi_spec: /etc/passwd` cannot make
// setup replace it.
Result<void> check_replaceable(const Context &ctx, const std::string &path, const char *key, const char *kind)
{
	const std::string dir = fs::dirname(path);
	if (dir == "/etc/cdi" || dir == "/var/run/cdi" || dir == "/run/cdi")
		return {};
	auto text = fs::read_file_at(AT_FDCWD, ctx.real(path), path, MAX_SPEC_BYTES);
	if (!text) {
		if (text.error().errnum == ENOENT)
			return {};
		return fail(make_error("Refusing to replace " + path + " (" + key + "): " + text.error().message));
	}
	if (text->empty() || is_our_spec(*text) || text->find(kind) != std::string::npos)
		return {};
	return fail(make_error("Refusing to replace " + path + " (" + key + "): it exists and is not a CDI spec of kind " + kind +
			       "; point " + key + " at a file of its own"));
}

Result<void> check_spec_replaceable(const Context &ctx)
{
	if (auto r = check_replaceable(ctx, ctx.config.cdi_spec, "cdi_spec", CDI_KIND); !r)
		return r;
	for (const auto &side : side_specs(ctx.config))
		if (auto r = check_replaceable(ctx, *side.path, side.key, side.kind); !r)
			return r;
	return {};
}

void warn(Report &report, const std::vector<std::string> &warnings)
{
	for (const auto &w : warnings) {
		log::warning(w);
		report.warnings.push_back(w);
	}
}

// Writes a spec next to where it goes, up to its rename; unchanged bytes are not rewritten.
Result<fs::PreparedWrite> prepare_spec_file(const Context &ctx, const std::string &path, const std::string &yaml)
{
	const std::string real = ctx.real(path);
	if (auto d = fs::mkdir_p(fs::dirname(real), 0755); !d)
		return fail(d.error());
	return fs::prepare_file_atomic(real, yaml, {.mode = 0644, .fsync = true, .skip_if_unchanged = true});
}

// All the specs: ours, and the side specs (side_specs.hpp: IMEX channels, NVSwitch, GDRCopy, GDS),
// each of which exists exactly while the machine has its devices (a spec of ours whose devices are
// gone is removed; one anyone else wrote is left alone).
// They change together or not at all, as far as a failure can decide it: every temp file is written
// before anything is renamed (a full /etc/cdi fails here, with every spec as it was), the side specs
// change first, and nvidia.yaml, the one that names the new driver root, is renamed last. A failure
// before that last rename leaves nvidia.yaml naming the previous root, which the caller then puts
// back; the side specs name only device nodes and machine files, never the root.
Result<fs::WriteOutcome> write_spec(const Context &ctx, Report &report, const SpecForState &cdi)
{
	auto main_spec = prepare_spec_file(ctx, ctx.config.cdi_spec, cdi.spec.yaml);
	if (!main_spec)
		return fail(main_spec.error());
	const auto sides = side_specs(ctx.config);
	std::vector<std::optional<fs::PreparedWrite>> prepared(sides.size());
	for (std::size_t i = 0; i < sides.size(); i++)
		if (const CdiSpec *spec = cdi.side(sides[i].kind)) {
			auto p = prepare_spec_file(ctx, *sides[i].path, spec->yaml);
			if (!p)
				return fail(p.error());
			prepared[i] = std::move(*p);
		}

	report.details["imex_channels"] = cdi.devices.imex_channels.size();
	for (std::size_t i = 0; i < sides.size(); i++) {
		const SideSpec &side = sides[i];
		report.details[side.key] = *side.path;
		if (prepared[i]) {
			report.details[std::string(side.key) + "_written"] = prepared[i]->outcome() == fs::WriteOutcome::Written;
			if (auto r = prepared[i]->commit(); !r)
				return fail(r.error());
			continue;
		}
		auto removed = remove_our_spec(ctx.real(*side.path), *side.path);
		if (!removed)
			return fail(removed.error());
		if (*removed)
			log::notice("Removed " + *side.path + ": the machine has no " + side.what + " any more.",
				    {{"MESSAGE_ID", message_id::CDI_SPEC_REMOVED}, {"UNBOUNDED_NVIDIA_PATH", *side.path}});
	}

	// Once renamed, nvidia.yaml names the new root: a directory that then fails to sync must not
	// make the caller put the old root back under it (the next boot's run writes the spec again).
	const fs::WriteOutcome outcome = main_spec->outcome();
	Error sync_error;
	if (auto r = main_spec->commit(&sync_error); !r)
		return fail(r.error());
	if (!sync_error.message.empty())
		warn(report, {sync_error.message});
	// Every node the specs name reachable by number, for runc's systemd cgroup driver (dev_char.hpp).
	auto links = ensure_dev_char_links(ctx, spec_device_nodes(cdi.devices));
	report.details["dev_char_links_created"] = links.created;
	report.details["dev_char_links_present"] = links.present;
	report.details["dev_char_links_removed"] = links.removed;
	warn(report, links.warnings);
	return outcome;
}

// The device plugin's spec is reported, never fatal: see check_device_plugin().
void warn_about_device_plugin(const Context &ctx, Report &report, const std::string &version)
{
	report.details["device_plugin_spec"] = ctx.config.device_plugin_spec;
	auto p = check_device_plugin(ctx, version);
	report.details["device_plugin_spec_current"] = !p.has_value();
	if (!p)
		return;
	log::warning(p->message, {{"MESSAGE_ID", message_id::DEVICE_PLUGIN_SPEC_STALE}, {"UNBOUNDED_NVIDIA_PATH", p->path}});
	report.warnings.push_back(p->message);
}


// What the devices say, and the GPUs the machine offers beside expected_gpus: fewer are served
// (exit 0: one missing GPU must not take the others down), said here and made a problem by verify.
void warn_about_devices(const Context &ctx, Report &report, const DeviceInventory &devices)
{
	warn(report, devices.warnings);
	report.details["gpus"] = devices.gpus.size();
	report.details["mig_devices"] = devices.mig_devices();
	if (ctx.config.expected_gpus)
		report.details["expected_gpus"] = *ctx.config.expected_gpus;
	if (auto shortfall = gpu_shortfall(ctx.config.expected_gpus, devices)) {
		log::warning(*shortfall + ": serving the GPU(s) there are.", {{"MESSAGE_ID", message_id::GPUS_MISSING}});
		report.warnings.push_back(*shortfall + ": serving the GPU(s) there are");
	}
}

int finish_not_ready(Report &report)
{
	report.outcome = "not-ready";
	for (const auto &p : report.problems)
		log::error("Not ready: " + p.message, {{"MESSAGE_ID", message_id::VERIFY_FAILED},
							  {"UNBOUNDED_NVIDIA_PATH", p.path}});
	report.error = std::to_string(report.problems.size()) + " verification problem(s), first: " +
		       report.problems.front().message;
	notify_status("Not ready: " + report.problems.front().message);
	return EXIT_NOT_READY;
}

// The live root stays: its spec is brought up to date for the devices there are now, and checked.
int keep_live_root(const Context &ctx, Report &report, const DriverDecision &decision, const Manifest &live)
{
	const Config &cfg = ctx.config;
	report.details["driver_version"] = live.driver_version;
	report.details["driver_root_kept"] = true;
	SpecForState cdi;
	{
		PhaseTimer t(report, "cdi");
		auto s = spec_for_state(ctx, live, /*learn_hook=*/true);
		if (!s)
			return finish_failed(ctx, report, s.error());
		cdi = std::move(*s);
		warn_about_devices(ctx, report, cdi.devices);
	}
	{
		PhaseTimer t(report, "write_cdi");
		if (auto r = check_spec_replaceable(ctx); !r)
			return finish_failed(ctx, report, r.error());
		auto w = write_spec(ctx, report, cdi);
		if (!w)
			return finish_failed(ctx, report, w.error());
		report.details["cdi_spec"] = cfg.cdi_spec;
		report.details["cdi_spec_written"] = *w == fs::WriteOutcome::Written;
	}
	{
		PhaseTimer t(report, "verify");
		const KnownState known{&live, &cdi, true};
		report.problems = check_live_state(ctx, report, &known);
	}
	if (!report.problems.empty())
		return finish_not_ready(report);
	warn_about_device_plugin(ctx, report, live.driver_version);

	report.outcome = outcome_name(decision.action);
	log::Fields fields = {{"UNBOUNDED_NVIDIA_DRIVER_VERSION", live.driver_version},
			      {"UNBOUNDED_NVIDIA_DRIVER_ROOT", cfg.driver_root}};
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

}  // namespace

namespace {

enum class Mode { Setup, Refresh };

// The spec goes in after the root it describes; if it cannot be written, the old root goes back, so
// root and spec never disagree because of a failed run.
Result<void> write_spec_after_swap(const Context &ctx, Report &report, const SpecForState &cdi,
				   std::optional<PreviousRoot> &previous, InstallStats &stats)
{
	PhaseTimer t(report, "write_cdi");
	Result<fs::WriteOutcome> w = write_spec(ctx, report, cdi);
	if (!w) {
		Error e = w.error();
		if (previous) {
			if (auto r = previous->rollback(); !r)
				e.message += "; and putting the previous driver root back failed: " + r.error().message;
			else
				e.message += "; the previous driver root was put back";
		}
		return fail(e);
	}
	report.details["cdi_spec_written"] = *w == fs::WriteOutcome::Written;
	if (previous)
		if (auto r = previous->commit(); !r) {
			// A mount inside the old tree: it stays aside, the next run tries again.
			warn(report, {r.error().message + "; the old driver root is left aside"});
			stats.stale_trees_kept++;
		}
	return {};
}

void record_install(const Context &ctx, Report &report, const InstallStats &stats)
{
	report.details["cdi_spec"] = ctx.config.cdi_spec;
	report.details["driver_root_fs"] = stats.fstype;
	report.details["unchanged"] = stats.unchanged;
	report.details["files"] = stats.files;
	report.details["links"] = stats.links;
	report.details["files_copied"] = stats.files_copied;
	report.details["files_reused"] = stats.files_reused;
	report.details["bytes_copied"] = stats.bytes_copied;
	report.details["bytes_reused"] = stats.bytes_reused;
	report.details["stale_trees_removed"] = stats.stale_trees_removed;
	report.details["stale_trees_kept"] = stats.stale_trees_kept;
	report.details["copy_threads"] = stats.copy_threads;
	// On tmpfs the root is memory the machine no longer has for pods: say how much.
	if (stats.fstype == "tmpfs")
		report.details["driver_root_ram_bytes"] = stats.bytes_copied + stats.bytes_reused;
	else
		warn(report, {"Driver root " + ctx.config.driver_root + " is on " + stats.fstype + ", expected tmpfs"});
	if (stats.stale_trees_removed)
		log::notice("Removed " + std::to_string(stats.stale_trees_removed) + " temporary tree(s) left by an interrupted run.");
}

// The last word of a run that built (or kept unchanged) the root: one line for the journal,
// `systemctl status` and the host.
int finish_ready(const Context &ctx, Report &report, const DriverSet &driver, const InstallStats &stats, const SpecForState &cdi,
		 std::chrono::steady_clock::time_point total_start)
{
	const Config &cfg = ctx.config;
	const auto total = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - total_start);
	const std::uint64_t root_bytes = stats.bytes_copied + stats.bytes_reused;
	const std::size_t migs = cdi.devices.mig_devices();
	report.outcome = "ready";
	std::string fabric;  // " (and nvidia.com/nvswitch, nvidia.com/gds)"
	for (const auto &[kind, spec] : cdi.fabric)
		fabric += (fabric.empty() ? " (and " : ", ") + std::string(kind);
	if (!fabric.empty())
		fabric += ")";
	std::string summary = "Driver " + driver.version + " ready in " + cfg.driver_root + ": " +
			      std::to_string(stats.files) + " files, " +
			      (stats.unchanged ? std::string("unchanged")
					       : std::to_string(stats.files_copied) + " copied (" + format_bytes(stats.bytes_copied) +
							 "), " + std::to_string(stats.files_reused) + " reused") +
			      (stats.fstype == "tmpfs" ? ", " + format_bytes(root_bytes) + " of RAM (tmpfs)" : std::string()) +
			      ", " + std::to_string(cdi.devices.gpus.size()) + " GPU(s)" +
			      (migs ? " with " + std::to_string(migs) + " MIG device(s)" : std::string()) +
			      (cdi.devices.imex_channels.empty() ? std::string() : " and " + std::to_string(cdi.devices.imex_channels.size()) + " IMEX channel(s)") + " in " +
			      cfg.cdi_spec + fabric + ", " + format_ms(total) + ".";
	log::info(summary, {{"MESSAGE_ID", message_id::SETUP_READY},
			    {"UNBOUNDED_NVIDIA_DRIVER_VERSION", driver.version},
			    {"UNBOUNDED_NVIDIA_DRIVER_ROOT", cfg.driver_root},
			    {"UNBOUNDED_NVIDIA_FILES", std::to_string(stats.files)},
			    {"UNBOUNDED_NVIDIA_FILES_COPIED", std::to_string(stats.files_copied)},
			    {"UNBOUNDED_NVIDIA_BYTES_COPIED", std::to_string(stats.bytes_copied)},
			    {"UNBOUNDED_NVIDIA_ROOT_BYTES", std::to_string(root_bytes)},
			    {"UNBOUNDED_NVIDIA_DURATION_MS", std::to_string(total.count())}});
	notify_status(summary);
	return EXIT_READY;
}

void record_left_out(Report &report, std::vector<LeftOut> left)
{
	std::vector<std::string> warnings;
	for (auto &l : left) {
		report.details["optional_left_out"].push_back(l.path);
		warnings.push_back(std::move(l.warning));
	}
	warn(report, warnings);
}

// Optional files whose copies would not fit the driver root's file system leave the plan, and so the
// manifest and the spec (optional_fit.hpp). Only when the copies might not fit are the trees a killed
// run left removed early (their space is free by the copies' time) and the live root read: on a
// machine with room this costs one statfs().
void leave_out_optional(const RootLocation &root, Report &report, const DriverSet &driver, Manifest &plan)
{
	auto space = free_space_for(root);
	auto fits = [&] { return !space || bytes_without_reuse(plan, space->block) + space_reserve(space->total) <= space->available; };
	if (fits())
		return;
	if (auto stale = remove_stale_temp_trees(root); stale && stale->stale_trees_removed) {
		warn(report, stale->warnings);
		space = free_space_for(root);
		if (fits())
			return;
	}
	if (!space)
		return;
	const LiveView live = read_live_view(root);
	record_left_out(report, leave_out_what_does_not_fit(plan, driver, live.reusable(), *space, root.display));
}

// Builds and swaps in the root for `driver` (kept as it is when unchanged), then writes its spec.
int build_root(const Context &ctx, Report &report, const DriverSet &driver, std::chrono::steady_clock::time_point total_start)
{
	const Config &cfg = ctx.config;
	const RootLocation root{ctx.real(cfg.driver_root), cfg.driver_root, cfg.staging};
	Manifest plan;
	{
		PhaseTimer t(report, "plan");
		std::vector<std::string> warnings;
		auto p = plan_manifest(driver, warnings);
		if (!p)
			return finish_failed(ctx, report, p.error());
		plan = std::move(*p);
		warn(report, warnings);
		leave_out_optional(root, report, driver, plan);
	}

	// The spec depends only on the planned root and the devices: generate it before touching
	// anything, so a device problem fails the run with the old root and spec untouched.
	SpecForState cdi;
	auto make_spec = [&]() -> Result<void> {
		PhaseTimer t(report, "cdi");
		auto s = spec_for_state(ctx, plan, /*learn_hook=*/true);
		if (!s)
			return fail(s.error());
		cdi = std::move(*s);
		report.details["gpu_source"] = cdi.devices.source;
		report.details["cdi_version"] = cdi.spec.cdi_version;
		report.details["cdi_devices"] = cdi.spec.devices;
		report.details["cdi_mounts"] = cdi.spec.mounts;
		report.details["cdi_hooks"] = cdi.spec.hooks;
		return {};
	};
	if (auto r = make_spec(); !r)
		return finish_failed(ctx, report, r.error());
	warn_about_devices(ctx, report, cdi.devices);

	if (auto r = check_spec_replaceable(ctx); !r)
		return finish_failed(ctx, report, r.error());
	InstallStats stats;
	std::optional<PreviousRoot> previous;
	{
		PhaseTimer t(report, "install");
		notify_status("Building " + cfg.driver_root + " for driver " + driver.version);
		auto s = install_driver_root(driver, plan, root, &previous);
		if (!s && s.error().errnum == ENOSPC) {
			// The file system filled up after the estimate (another writer to /run): once more
			// without the optional files that would be copied, with their spec. A failed install
			// left the old root and spec as they were.
			const LiveView live = read_live_view(root);
			auto left = leave_out_all_copied(plan, driver, live.reusable(), cfg.driver_root,
							 s.error().message);
			if (!left.empty()) {
				record_left_out(report, std::move(left));
				if (auto r = make_spec(); !r)
					return finish_failed(ctx, report, r.error());
				s = install_driver_root(driver, plan, root, &previous);
			}
		}
		if (!s)
			return finish_failed(ctx, report, s.error());
		stats = *s;
		warn(report, stats.warnings);
	}
	if (auto r = write_spec_after_swap(ctx, report, cdi, previous, stats); !r)
		return finish_failed(ctx, report, r.error());
	record_install(ctx, report, stats);

	{
		PhaseTimer t(report, "verify");
		const KnownState known{&plan, &cdi, stats.unchanged};
		report.problems = check_live_state(ctx, report, &known);
	}
	if (!report.problems.empty())
		return finish_not_ready(report);
	warn_about_device_plugin(ctx, report, driver.version);
	return finish_ready(ctx, report, driver, stats, cdi, total_start);
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
Result<StagingState> staging_state(const Context &ctx, Report &report, Mode mode)
{
	if (mode == Mode::Refresh)
		return probe_staging(ctx);
	PhaseTimer t(report, "wait");
	notify_status("Waiting for the staging mounts under " + ctx.config.staging + " and /dev/nvidiactl");
	Millis waited{};
	return wait_for_staging(ctx, ctx.config.staging_timeout, &waited);
}

// What the host has staged, through the discovery memo; recorded in the report.
StagedDriver discover_step(const Context &ctx, Report &report, const StagingState &state, int run_dir, const KernelModule &module)
{
	PhaseTimer t(report, "discover");
	report.details["staging"] = state.usable;
	report.details["staging_mounts"] = state.mounts;
	StagedDriver staged;
	if (state.usable.empty())
		staged.error = make_error("No staging mounts under " + ctx.config.staging, EXIT_NOT_READY, ENOENT);
	else
		staged = discover_staged(ctx, state, run_dir, module.version, /*save=*/true);
	report.details["discovery_cache_hits"] = staged.cache_hits;
	warn(report, staged.warnings);
	if (staged.driver) {
		report.details["staged_driver_version"] = staged.driver->version;
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

// One run of setup or refresh, under the lock.
int apply(const Context &ctx, Report &report, Mode mode, int run_dir)
{
	const Config &cfg = ctx.config;
	const auto total_start = std::chrono::steady_clock::now();
	report.details["driver_root"] = cfg.driver_root;

	std::optional<RunLock> lock;
	{
		PhaseTimer t(report, "lock");
		auto l = take_lock(run_dir);
		if (!l)
			return finish_failed(ctx, report, l.error());
		lock.emplace(std::move(*l));
	}
	auto staging = staging_state(ctx, report, mode);
	if (!staging)
		return finish_failed(ctx, report, staging.error());
	const StagingState &state = *staging;
	struct stat root_st{};
	const bool root_exists = ::lstat(ctx.real(cfg.driver_root).c_str(), &root_st) == 0;
	if (!state.nvidia_machine && (mode == Mode::Setup || !root_exists)) {
		report.outcome = "no-gpu";
		log::info("No staging mounts under " + cfg.staging + " and no /dev/nvidiactl: not an NVIDIA machine, nothing to do.",
			  {{"MESSAGE_ID", message_id::SETUP_NO_GPU}});
		notify_status("Not an NVIDIA machine, nothing to do");
		return EXIT_READY;
	}

	// The kernel module is read on every run: a path unit cannot watch /proc, so a module reload is
	// noticed by the next refresh, whatever started it.
	const KernelModule module = read_kernel_module(ctx);
	report.details["kernel_module_version"] = module.version.value_or("");

	const StagedDriver staged = discover_step(ctx, report, state, run_dir, module);
	Manifest live_manifest;
	DriverWitnesses witnesses = witnesses_of(module, state, staged, mode);
	witnesses.live = [&]() -> std::optional<std::string> {
		PhaseTimer t(report, "check_live_root");
		auto problems = verify_driver_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root}, &live_manifest);
		if (!problems.empty() || live_manifest.driver_version.empty())
			return std::nullopt;
		return live_manifest.driver_version;
	};
	const DriverDecision decision = decide_driver(witnesses);
	if (!decision.warning.empty()) {
		log::notice(decision.warning + ".");
		report.warnings.push_back(decision.warning);
	}
	switch (decision.action) {
	case DriverAction::Build:
		report.details["driver_version"] = staged.driver->version;
		return build_root(ctx, report, *staged.driver, total_start);
	case DriverAction::Fail:
		if (!staged.driver && decision.message == staged.error.message)
			return finish_failed(ctx, report, staged.error);
		return finish_failed(ctx, report, make_error(decision.message));
	default:
		return keep_live_root(ctx, report, decision, live_manifest);
	}
}

}  // namespace

int run_setup(const Context &ctx, Report &report)
{
	report.command = "setup";
	auto run_dir = fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR);
	if (!run_dir)
		return finish_failed(ctx, report, run_dir.error());
	return apply(ctx, report, Mode::Setup, run_dir->get());
}

namespace {

// Which IPC endpoints are there: a daemon that stops or starts while a refresh works is not seen by
// the path unit watching its directory (systemd 252 drops its watches while the service runs).
std::string ipc_presence(const Context &ctx)
{
	std::string s;
	if (ctx.config.ipc_sockets)
		for (const auto &e : IPC_ENDPOINTS) {
			struct stat st{};
			s += ::lstat(ctx.real(e.path).c_str(), &st) == 0 ? '1' : '0';
		}
	return s;
}

}  // namespace

int run_refresh(const Context &ctx, Report &report)
{
	const RefreshConfig &rc = ctx.config.refresh;
	auto run_dir = fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR);
	if (!run_dir) {
		report.command = "refresh";
		return finish_failed(ctx, report, run_dir.error());
	}
	// Changes made while a refresh works are not seen by the path unit (systemd 252 drops its watches
	// while the service runs): when staging changed during a pass, go again. Bounded: a host that
	// never stops changing is left to the timer.
	constexpr int MAX_PASSES = 3;
	Millis settle_total{};
	int rc_exit = EXIT_NOT_READY;
	for (int pass = 1; pass <= MAX_PASSES; pass++) {
		report = Report{};
		report.command = "refresh";
		QuietWait quiet;
		{
			PhaseTimer t(report, "settle");
			notify_status("Waiting until " + ctx.config.staging + " has been quiet for " + format_duration(rc.settle_time));
			quiet = wait_for_quiet_staging(ctx, rc.settle_time, rc.settle_limit);
		}
		settle_total += quiet.waited;
		if (quiet.gave_up) {
			const std::string w = ctx.config.staging + " was still changing after " + format_duration(rc.settle_limit) +
					      " (refresh.settle_limit), reading it anyway";
			warn(report, {w});
		}
		const std::string ipc_before = ipc_presence(ctx);
		rc_exit = apply(ctx, report, Mode::Refresh, run_dir->get());
		report.details["settle_waited_ms"] = settle_total.count();
		report.details["passes"] = pass;
		const bool ipc_changed = ipc_presence(ctx) != ipc_before;
		if (quiet.watch.stamp() == quiet.stamp && !ipc_changed)
			break;
		if (pass < MAX_PASSES)
			log::notice((ipc_changed ? std::string("An NVIDIA daemon's socket came or went") : ctx.config.staging + " changed") +
				    " while the refresh ran, refreshing again.");
	}
	return rc_exit;
}

}  // namespace unbounded
