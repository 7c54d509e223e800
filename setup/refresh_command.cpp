// `refresh`: what unbounded-nvidia-refresh.service runs while containerd keeps running. It first
// waits for staging to settle, runs setup's flow (setup_flow.hpp) in refresh mode, and goes again
// when staging changed while it worked.
#include "commands.hpp"

#include "execute.hpp"
#include "format.hpp"
#include "ipc.hpp"
#include "sd_protocols.hpp"
#include "self_repair.hpp"
#include "log.hpp"
#include "setup_flow.hpp"
#include "setup_report.hpp"
#include "staging_quiet.hpp"

#include <sys/stat.h>

namespace unbounded {
namespace {

// Which IPC endpoints are there: a daemon that stops or starts while a refresh works is not seen by
// the path unit watching its directory (systemd 252 drops its watches while the service runs).
std::string ipc_presence(const Context &ctx)
{
	std::string s;
	if (ctx.config.ipc_sockets)
		for (const auto &e : IPC_ENDPOINTS) {
			struct stat st = {};
			s += ::lstat(ctx.real(e.path).c_str(), &st) == 0 ? '1' : '0';
		}
	return s;
}

}  // namespace

int run_refresh(const Context &ctx, Report &report)
{
	const RefreshConfig &rc = ctx.config.refresh;
	auto run_dir = open_run_dir(ctx);
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
		if (quiet.gave_up)
			warn(report, {ctx.config.staging + " was still changing after " + format_duration(rc.settle_limit) +
				      " (refresh.settle_limit), reading it anyway"});
		const std::string ipc_before = ipc_presence(ctx);
		rc_exit = apply(ctx, report, Mode::Refresh, run_dir->get(), &quiet.watch.trees());
		report.details["settle_waited_ms"] = settle_total.count();
		report.details["passes"] = pass;
		const bool ipc_changed = ipc_presence(ctx) != ipc_before;
		if (!ipc_changed && !quiet.watch.changed_since(quiet.stamp))
			break;
		if (pass < MAX_PASSES)
			log::notice((ipc_changed ? std::string("An NVIDIA daemon's socket came or went") : ctx.config.staging + " changed") +
				    " while the refresh ran, refreshing again.");
	}
	// A failed boot setup held containerd and kubelet back: a ready root lets them start now.
	if (rc_exit == EXIT_READY && report.ready() && report.outcome != "no-gpu")
		start_held_back(ctx, report);
	return rc_exit;
}

}  // namespace unbounded
