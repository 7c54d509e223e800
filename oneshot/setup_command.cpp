// `setup`: lock, wait for staging, discover, build and swap the driver root, verify, record the result.
// Any failure leaves the previous driver root exactly as it was.
#include "commands.hpp"

#include "bounded_parse.hpp"
#include "cdi_state.hpp"
#include "discovery_cache.hpp"
#include "driver_discovery.hpp"
#include "driver_root.hpp"
#include "format.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "mounts.hpp"
#include "notify.hpp"
#include "staging.hpp"
#include "staging_wait.hpp"

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

// The file at cdi_spec is replaced on every run. In a CDI spec directory that file is a spec by
// definition (whatever a hostile writer left there is overwritten); anywhere else it must already
// be a CDI spec for NVIDIA GPUs, so that a configured `cdi_spec: /etc/passwd` cannot make setup
// replace it.
Result<void> check_spec_replaceable(const Context &ctx)
{
	const std::string &path = ctx.config.cdi_spec;
	const std::string dir = fs::dirname(path);
	if (dir == "/etc/cdi" || dir == "/var/run/cdi" || dir == "/run/cdi")
		return {};
	auto text = fs::read_file_at(AT_FDCWD, ctx.real(path), path, MAX_SPEC_BYTES);
	if (!text) {
		if (text.error().errnum == ENOENT)
			return {};
		return fail(make_error("Refusing to replace " + path + " (cdi_spec): " + text.error().message));
	}
	if (text->empty() || text->find(CDI_KIND) != std::string::npos)
		return {};
	return fail(make_error("Refusing to replace " + path + " (cdi_spec): it exists and is not a CDI spec of kind " +
			       CDI_KIND + "; point cdi_spec at a file of its own"));
}

}  // namespace

int run_setup(const Context &ctx, Report &report)
{
	report.command = "setup";
	const Config &cfg = ctx.config;
	report.details["driver_root"] = cfg.driver_root;
	const auto total_start = std::chrono::steady_clock::now();

	// The run directory holds the lock, the discovery memo and status.json: it must be ours alone,
	// or a forged memo could steer what setup builds as root.
	auto run_dir = fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR);
	if (!run_dir)
		return finish_failed(ctx, report, run_dir.error());

	std::optional<RunLock> lock;
	{
		PhaseTimer t(report, "lock");
		auto l = RunLock::acquire(run_dir->get(), "lock", std::string(RUN_DIR) + "/lock", [](RunLock::Holder h) {
			const std::string what = h == RunLock::Holder::Writer
							 ? "Another unbounded-nvidia-setup run is in progress"
							 : "unbounded-nvidia-setup verify is reading the live state";
			log::notice(what + ", waiting for it to finish.");
			notify_status(what + ", waiting");
		});
		if (!l)
			return finish_failed(ctx, report, l.error());
		lock.emplace(std::move(*l));
	}

	StagingState state;
	{
		PhaseTimer t(report, "wait");
		notify_status("Waiting for the staging mounts under " + cfg.staging + " and /dev/nvidiactl");
		Millis waited{};
		auto s = wait_for_staging(ctx, cfg.staging_timeout, &waited);
		if (!s)
			return finish_failed(ctx, report, s.error());
		state = *s;
	}
	if (!state.nvidia_machine) {
		report.outcome = "no-gpu";
		log::info("No staging mounts under " + cfg.staging + " and no /dev/nvidiactl: not an NVIDIA machine, nothing to do.",
			  {{"MESSAGE_ID", message_id::SETUP_NO_GPU}});
		notify_status("Not an NVIDIA machine, nothing to do");
		return EXIT_READY;
	}

	DriverSet driver;
	Manifest plan;
	{
		PhaseTimer t(report, "discover");
		auto staging = Staging::open(ctx.real(cfg.staging), cfg.staging, state.mounts_table.get());
		if (!staging)
			return finish_failed(ctx, report, staging.error());
		report.details["staging"] = state.usable;
		report.details["staging_mounts"] = state.mounts;
		const std::string cache_display = std::string(RUN_DIR) + "/" + DiscoveryCache::FILE_NAME;
		std::string cache_rejected;
		DiscoveryCache cache = DiscoveryCache::load(run_dir->get(), cache_display, &cache_rejected);
		if (!cache_rejected.empty()) {
			log::warning(cache_rejected + ", reading the staging mounts afresh");
			report.warnings.push_back(cache_rejected);
		}
		DiscoveryInput in{&*staging, ctx.real("/proc/driver/nvidia/version"), "/proc/driver/nvidia/version", &cache};
		auto d = discover_driver(in);
		if (auto r = cache.save(run_dir->get(), cache_display); !r)
			log::debug(r.error().message + ", discovery cache not saved");
		report.details["discovery_cache_hits"] = cache.hits();
		if (!d)
			return finish_failed(ctx, report, d.error());
		driver = std::move(*d);
		report.details["driver_version"] = driver.version;
		report.details["kernel_module_version"] = driver.kernel_version;
		report.details["multiarch"] = driver.multiarch;
		auto p = plan_manifest(driver, driver.warnings);
		if (!p)
			return finish_failed(ctx, report, p.error());
		plan = std::move(*p);
		for (const auto &w : driver.warnings) {
			log::warning(w);
			report.warnings.push_back(w);
		}
		if (driver.kernel_version.empty())
			log::info("/proc/driver/nvidia/version is not readable here, skipping the kernel module version check.");
	}

	// The spec depends only on the planned root and the devices: generate it before touching
	// anything, so a device problem fails the run with the old root and spec untouched.
	SpecForState cdi;
	{
		PhaseTimer t(report, "cdi");
		auto s = spec_for_state(ctx, plan);
		if (!s)
			return finish_failed(ctx, report, s.error());
		cdi = std::move(*s);
		for (const auto &w : cdi.devices.warnings) {
			log::warning(w);
			report.warnings.push_back(w);
		}
		report.details["gpus"] = cdi.devices.gpus.size();
		report.details["gpu_source"] = cdi.devices.source;
		report.details["cdi_version"] = cdi.spec.cdi_version;
		report.details["cdi_devices"] = cdi.spec.devices;
		report.details["cdi_mounts"] = cdi.spec.mounts;
		report.details["cdi_hooks"] = cdi.spec.hooks;
	}

	const RootLocation root{ctx.real(cfg.driver_root), cfg.driver_root, cfg.staging};
	if (auto r = check_spec_replaceable(ctx); !r)
		return finish_failed(ctx, report, r.error());
	InstallStats stats;
	std::optional<PreviousRoot> previous;
	{
		PhaseTimer t(report, "install");
		notify_status("Building " + cfg.driver_root + " for driver " + driver.version);
		auto s = install_driver_root(driver, plan, root, &previous);
		if (!s)
			return finish_failed(ctx, report, s.error());
		stats = *s;
		for (const auto &w : stats.warnings) {
			log::warning(w);
			report.warnings.push_back(w);
		}
	}

	{
		// The spec goes in after the root it describes; if it cannot be written, the old root goes
		// back, so root and spec never disagree because of a failed run.
		PhaseTimer t(report, "write_cdi");
		const std::string spec_path = ctx.real(cfg.cdi_spec);
		Result<fs::WriteOutcome> w = fs::WriteOutcome::Unchanged;
		if (auto d = fs::mkdir_p(fs::dirname(spec_path), 0755); !d)
			w = fail(d.error());
		else
			w = fs::write_file_atomic(spec_path, cdi.spec.yaml, {.mode = 0644, .fsync = true, .skip_if_unchanged = true});
		if (w)
			report.details["cdi_spec_written"] = *w == fs::WriteOutcome::Written;
		if (!w) {
			Error e = w.error();
			if (previous) {
				if (auto r = previous->rollback(); !r)
					e.message += "; and putting the previous driver root back failed: " + r.error().message;
				else
					e.message += "; the previous driver root was put back";
			}
			return finish_failed(ctx, report, e);
		}
		if (previous)
			if (auto r = previous->commit(); !r) {
				// A mount inside the old tree: it stays aside, the next run tries again.
				const std::string w = r.error().message + "; the old driver root is left aside";
				log::warning(w);
				report.warnings.push_back(w);
				stats.stale_trees_kept++;
			}
	}
	report.details["cdi_spec"] = cfg.cdi_spec;
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
	if (stats.fstype != "tmpfs") {
		std::string w = "Driver root " + cfg.driver_root + " is on " + stats.fstype + ", expected tmpfs";
		log::warning(w);
		report.warnings.push_back(w);
	}
	if (stats.stale_trees_removed)
		log::notice("Removed " + std::to_string(stats.stale_trees_removed) + " temporary tree(s) left by an interrupted run.");

	{
		PhaseTimer t(report, "verify");
		const KnownState known{&plan, &cdi, stats.unchanged};
		report.problems = check_live_state(ctx, report, &known);
	}
	const auto total = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - total_start);
	if (!report.problems.empty()) {
		report.outcome = "not-ready";
		for (const auto &p : report.problems)
			log::error("Not ready: " + p.message, {{"MESSAGE_ID", message_id::VERIFY_FAILED},
									  {"UNBOUNDED_NVIDIA_PATH", p.path}});
		report.error = std::to_string(report.problems.size()) + " verification problem(s), first: " +
			       report.problems.front().message;
		notify_status("Not ready: " + report.problems.front().message);
		return EXIT_NOT_READY;
	}

	report.outcome = "ready";
	std::string summary = "Driver " + driver.version + " ready in " + cfg.driver_root + ": " +
			      std::to_string(stats.files) + " files, " +
			      (stats.unchanged ? std::string("unchanged")
					       : std::to_string(stats.files_copied) + " copied (" + format_bytes(stats.bytes_copied) +
							 "), " + std::to_string(stats.files_reused) + " reused") +
			      ", " + std::to_string(cdi.devices.gpus.size()) + " GPU(s) in " + cfg.cdi_spec + ", " + format_ms(total) + ".";
	log::info(summary, {{"MESSAGE_ID", message_id::SETUP_READY},
			    {"UNBOUNDED_NVIDIA_DRIVER_VERSION", driver.version},
			    {"UNBOUNDED_NVIDIA_DRIVER_ROOT", cfg.driver_root},
			    {"UNBOUNDED_NVIDIA_FILES", std::to_string(stats.files)},
			    {"UNBOUNDED_NVIDIA_FILES_COPIED", std::to_string(stats.files_copied)},
			    {"UNBOUNDED_NVIDIA_BYTES_COPIED", std::to_string(stats.bytes_copied)},
			    {"UNBOUNDED_NVIDIA_DURATION_MS", std::to_string(total.count())}});
	notify_status(summary);
	return EXIT_READY;
}

}  // namespace unbounded
