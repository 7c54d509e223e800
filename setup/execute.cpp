#include "execute.hpp"

#include "driver_generation.hpp"

#include "cdi_hook.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "metrics.hpp"
#include "metrics_report.hpp"
#include "spec_marker.hpp"

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <unistd.h>

namespace unbounded {

Result<UniqueFd> open_run_dir(const Context &ctx)
{
	return fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR);
}

void save_memos(int run_dir, const MachineDevices &machine, std::optional<DiscoveryCache> discovery_memo)
{
	if (run_dir < 0)
		return;
	if (discovery_memo)
		if (auto r = discovery_memo->save(run_dir, std::string(RUN_DIR) + "/" + DiscoveryCache::FILE_NAME); !r)
			log::debug(r.error().message + ", discovery cache not saved");
	if (!machine.hook_memo.empty())
		save_hook_memo(run_dir, RUN_DIR, machine.hook_memo);
}

Result<InstallStats> reclaim_stale_trees(const RootLocation &root)
{
	return remove_stale_temp_trees(root);
}

Result<InstallStats> install_root(const DriverSet &driver, const Manifest &plan, const RootLocation &root,
				  std::optional<PreviousRoot> &previous, const std::optional<std::string> &live_manifest_text)
{
	return install_driver_root(driver, plan, root, previous, live_manifest_text);
}

Result<fs::WriteOutcome> write_generated_spec(const std::string &output, const std::string &yaml)
{
	return fs::write_file_atomic(output, yaml, {.mode = 0644, .fsync = true, .skip_if_unchanged = true});
}

Result<bool> remove_spec_of_ours(const Context &ctx, const std::string &path)
{
	return remove_our_spec(ctx.real(path), path);
}

Result<void> record_driver_generation(int run_dir, const std::string &json)
{
	auto w = fs::write_file_atomic_at(run_dir, DRIVER_GENERATION_FILE, std::string(RUN_DIR) + "/" + DRIVER_GENERATION_FILE, json,
					  {.mode = 0644, .fsync = false, .skip_if_unchanged = true});
	if (!w)
		return fail(w.error());
	return {};
}

void record_status(const Context &ctx, const Report &report)
{
	const std::string status = std::string(RUN_DIR) + "/status.json";
	if (auto dir = open_run_dir(ctx); !dir)
		log::warning(dir.error().message + ", not recording the result");
	else if (auto w = fs::write_file_atomic_at(dir->get(), "status.json", status, report.to_json(),
						   {.mode = 0644, .fsync = false, .skip_if_unchanged = false});
		 !w) {
		// An older run's record must not stand for this one (a full /run kept a "ready" there after a
		// refresh that failed): no record says "unknown", which is true. Unlinking needs no room.
		const bool removed = ::unlinkat(dir->get(), "status.json", 0) == 0;
		log::warning(w.error().message + ", not recording the result" + (removed ? " (the previous run's record is removed)" : ""));
	}
}

void record_metrics(const Context &ctx, const Report &report, double duration_seconds, std::size_t held_back_units)
{
	const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
	const std::string &dir = ctx.config.metrics_dir;
	// The refresh timer runs on a GPU machine only: setup and refresh there, never on a CPU node.
	const bool timer = (report.command == "setup" || report.command == "refresh") && report.outcome != "no-gpu";
	const double interval = timer ? std::chrono::duration<double>(ctx.config.refresh.interval).count() : 0;
	publish_metrics(ctx.real(dir), dir, "unbounded-nvidia-setup.prom",
			setup_metrics_text(report, now, duration_seconds, interval, static_cast<double>(held_back_units)));
}

}  // namespace unbounded
