// unbounded-nvidia-license-reload: started by its .path unit and .timer; argument handling, signals,
// the real seams (sleep, randomness, PIDs) and the unit manager (sd-bus; under --root only the tests'
// file, unit_manager.hpp). The work is LicenseReloader.
#include "build_config.h"
#include "config.hpp"
#include "context.hpp"
#include "bounded_parse.hpp"
#include "gridd_journal.hpp"
#include "feature_type.hpp"
#include "license_metrics.hpp"
#include "license_reload.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "version.hpp"
#include "main_guard.hpp"
#include "sd_protocols.hpp"
#include "proc_stat.hpp"
#include "random.hpp"
#include "unit_manager.hpp"

#include <atomic>
#include <variant>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <getopt.h>
#include <thread>

using namespace unbounded;

namespace {

std::atomic<bool> stop_flag{false};

void on_signal(int) { stop_flag = true; }

void sleep_through(Millis d) { std::this_thread::sleep_for(d); }

// At boot nothing restarts anything: the boot install never asks the service manager (which may not
// even answer on a bus yet).
class NoUnitManager final : public UnitManager {
public:
	Result<UnitStatus> status(const std::string &unit) override { return fail(refused(unit)); }
	Result<UnitState> state(const std::string &unit) override { return fail(refused(unit)); }
	Result<void> stop(const std::string &unit, Millis) override { return fail(refused(unit)); }
	Result<void> start(const std::string &unit, Millis) override { return fail(refused(unit)); }
	Result<bool> system_stopping() override { return fail(refused("the manager")); }

private:
	static Error refused(const std::string &unit) { return make_error("The boot install does not talk to the service manager (" + unit + ")"); }
};

void sleep_unless_stopped(Millis d)
{
	const auto end = std::chrono::steady_clock::now() + d;
	while (!stop_flag && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(Millis(100), end - std::chrono::steady_clock::now()));
}

// A process that exists and is not a zombie. systemd finishes a stop job (and says so on the bus)
// before it reaps the main process, so right after the job the old daemon can still be a zombie.
bool pid_alive(std::uint32_t pid)
{
	if (pid == 0 || (::kill(static_cast<pid_t>(pid), 0) < 0 && errno != EPERM))
		return false;
	auto st = read_proc_stat(pid);
	return st && !st->exited();  // none: gone between the two looks; unparseable ('?'): alive
}

struct Args {
	std::string root, config;
	bool boot = false;
	bool npd = false;         // node-problem-detector's custom plugin: NvidiaLicenseNotAcquired
	bool npd_reboot = false;  // --npd=reboot: NvidiaLicenseRebootRequired
};

// node-problem-detector's custom plugin protocol (exit 0 OK, 1 the condition is true, 2 unknown):
// one line of at most 80 characters in every case, as `unbounded-nvidia-setup verify --npd` writes
// it; node-problem-detector shows it as the condition's message.
void npd_print(const std::string &text) { std::printf("%s\n", log::npd_line(text).c_str()); }

// What the reloader last recorded, for either condition; else the answer already printed, as the
// exit status: no state directory is no condition (not an unknown, exit 2 everywhere else: a machine
// that licenses nothing has none), one not root's alone is an unknown.
std::variant<LicenseCounters, int> recorded_for_npd(const Context &ctx)
{
	const std::string &state_dir = ctx.config.licensing.state_dir;
	auto dir = fs::open_dir(ctx.real(state_dir));
	if (!dir) {
		npd_print("licensing not used here (no license state): the condition does not apply");
		return 0;
	}
	if (auto t = fs::check_trusted(dir->get(), state_dir, /*directory=*/true); !t) {
		npd_print("unknown: " + t.error().message);
		return 2;
	}
	return read_license_counters(ctx, dir->get());
}

// NvidiaLicenseNotAcquired: true when nvidia-gridd has run unlicensed or pending for longer than
// licensing.not_acquired_after. Reads what the reloader's last run recorded; it observes, and so
// does this: nothing is restarted for it.
int npd_license(const Context &ctx)
{
	auto recorded = recorded_for_npd(ctx);
	if (const int *rc = std::get_if<int>(&recorded))
		return *rc;
	LicenseCounters &c = std::get<LicenseCounters>(recorded);
	const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
	// The record may be older than the license's expiry: the clock decides, as on the reloader's run.
	judge_license_expiry(c, now);
	const double age = c.license_since > 0 && now > c.license_since ? now - c.license_since : 0;
	const auto minutes = [](double s) { return std::to_string(static_cast<long long>(s / 60)) + "m"; };
	std::string state = license_state_name(c.license);
	if (c.license == LicenseState::Unlicensed && c.license_expiry > 0)
		state += " (expired)";
	if (c.license == LicenseState::Unlicensed || c.license == LicenseState::Pending) {
		const double limit = std::chrono::duration<double>(ctx.config.licensing.not_acquired_after).count();
		npd_print(state + " for " + minutes(age) + " (condition after " + minutes(limit) + ")");
		return age >= limit ? 1 : 0;
	}
	npd_print(state + " for " + minutes(age));
	return 0;
}

// NvidiaLicenseRebootRequired: rotated files whose FeatureType waits for the host's reboot, as the
// reloader's last run on this boot of the host recorded it.
int npd_reboot(const Context &ctx)
{
	auto recorded = recorded_for_npd(ctx);
	if (const int *rc = std::get_if<int>(&recorded))
		return *rc;
	const LicenseCounters &c = std::get<LicenseCounters>(recorded);
	if (c.held_feature < 0 || !host_boot(ctx).same_as(c.recorded_boot())) {
		npd_print("no licensing change waits for a host reboot");
		return 0;
	}
	npd_print("FeatureType=" + std::to_string(c.held_feature) + " waits for a host reboot (licensed: FeatureType=" +
		  (c.licensed_feature > 0 ? std::to_string(c.licensed_feature) : std::string("?")) + ")");
	return 1;
}

// A usage error is on stderr; with --npd anywhere on the line node-problem-detector reads stdout too.
int usage_error(int argc, char **argv, const std::string &what)
{
	std::fprintf(stderr, "unbounded-nvidia-license-reload: %s\n", what.c_str());
	for (int i = 1; i < argc; i++)
		if (std::string_view(argv[i]).starts_with("--npd")) {
			npd_print("unknown: " + what);
			break;
		}
	return EXIT_USAGE;
}

void print_help()
{
	std::printf("Usage: unbounded-nvidia-license-reload [--root DIR] [--config FILE] [--boot | --npd[=reboot]]\n\n"
		    "Applies rotated vGPU licensing files by restarting nvidia-gridd alone; started by\n"
		    "unbounded-nvidia-license-reload.path and .timer.\n\n"
		    "Options:\n"
		    "  --root DIR      take every absolute path relative to DIR (also $UNBOUNDED_NVIDIA_ROOT)\n"
		    "  --config FILE   configuration file (default %s under the root)\n"
		    "  --boot          install the source's files before nvidia-gridd's first start: no jitter,\n"
		    "                  no restart, no service manager\n"
		    "  --npd           node-problem-detector plugin protocol for NvidiaLicenseNotAcquired (one\n"
		    "                  line; exit 1 when nvidia-gridd has run unlicensed or pending longer than\n"
		    "                  licensing.not_acquired_after, 0 when not, 2 unknown)\n"
		    "  --npd=reboot    the same for NvidiaLicenseRebootRequired: exit 1 while rotated files ask\n"
		    "                  for another FeatureType than this host boot's license (kept back until\n"
		    "                  the host reboots)\n"
		    "  -h --help       show this help\n"
		    "  --version       show the release and the commit it was built from\n\n"
		    "Environment:\n"
		    "  VGPU_LICENSE_AUTO_RELOAD      anything but 'true' switches the reloader off\n"
		    "  VGPU_LICENSE_RELOAD_INTERVAL  the timer's interval, a duration (30s, 2m; a bare number is\n"
		    "                                seconds) of at least 1s, applied by the generator\n\n"
		    "Exit status: 0 applied or nothing to do, 1 rolled back or failed, 2 usage or configuration error.\n\n"
		    "See unbounded-nvidia-license-reload(8).\n",
		    std::string(DEFAULT_CONFIG_PATH).c_str());
}

// 0 to go on, -1 for a clean exit (--help, --version), else the exit status.
int parse_args(int argc, char **argv, Args &a)
{
	static const option opts[] = {{"root", required_argument, nullptr, 'r'}, {"config", required_argument, nullptr, 'c'}, {"boot", no_argument, nullptr, 'b'}, {"help", no_argument, nullptr, 'h'}, {"npd", optional_argument, nullptr, 'n'}, {"version", no_argument, nullptr, 'V'}, {nullptr, 0, nullptr, 0}};
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, nullptr)) >= 0;) {
		switch (c) {
		case 'r': a.root = optarg; break;
		case 'c': a.config = optarg; break;
		case 'b': a.boot = true; break;
		case 'n':
			a.npd = true;
			if (optarg && std::string_view(optarg) == "reboot")
				a.npd_reboot = true;
			else if (optarg && std::string_view(optarg) != "license")
				return usage_error(argc, argv, "--npd takes 'license' (the default) or 'reboot', not '" + printable(optarg) + "'");
			break;
		case 'h': print_help(); return -1;
		case 'V': print_version("unbounded-nvidia-license-reload"); return -1;
		default:
			return usage_error(argc, argv, "unknown or incomplete option '" + printable(argv[optind - 1]) + "' (see --help)");
		}
	}
	if (optind < argc)
		return usage_error(argc, argv, "unexpected argument '" + printable(argv[optind]) + "'");
	// One run is the boot install or node-problem-detector's question, never both (--npd
	// used to answer and --boot went unheeded).
	if (a.boot && a.npd)
		return usage_error(argc, argv, "--boot and --npd cannot be combined (see --help)");
	return 0;
}

// The configuration, and the licensing knobs of the service's environment. Returns the exit code
// when there is nothing to run with.
std::optional<int> load_context(const Args &args, Context &ctx)
{
	ctx.root = effective_root(args.root);
	log::set_machine_root(ctx.root);
	auto cfg = load_config(args.config.empty() ? ctx.real(DEFAULT_CONFIG_PATH) : args.config, !args.config.empty());
	if (!cfg) {
		log::error(cfg.error().message);
		if (args.npd)  // node-problem-detector reads one line in every case: "unknown", and why
			npd_print("unknown: " + cfg.error().message);
		return EXIT_USAGE;
	}
	ctx.config = std::move(*cfg);
	// The service gets LICENSE_ENVIRONMENT_FILE through EnvironmentFile=: the process environment is
	// all there is to read. A bad knob is a warning, never a reason to stop rotating.
	std::vector<std::string> env_warnings;
	for (const auto &w : apply_license_environment(ctx.config.licensing, license_environment("", env_warnings)))
		log::warning(w);
	return std::nullopt;
}

// One reload (or the boot install) under the state directory's lock; the metrics and STATUS= after.
int reload(const Context &ctx, bool boot, int state_fd)
{
	ReloadSeams seams{sleep_unless_stopped, sleep_through, random_below, pid_alive, [] { return stop_flag.load(); }, nullptr,
			  [&ctx, state_fd] { return licensed_feature_this_boot(ctx, state_fd); }};
	Result<ReloadReport> report = ReloadReport{};
	std::optional<GriddView> gridd;  // none at boot: nvidia-gridd has not started yet
	if (boot) {
		NoUnitManager none;
		report = LicenseReloader(ctx, none, seams).install_at_boot();
	} else {
		// The live system's manager; under --root the one running in the tree, if any: an offline
		// image's nvidia-gridd is not this system's.
		auto units = unit_manager_for(ctx);
		if (units && !*units)
			units = fail(make_error("A --root run has no service manager to restart " + ctx.config.licensing.gridd_unit +
						" with (no " + ctx.real("/run/systemd/private") + ")"));
		if (!units) {
			log::error(units.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
			record_license_metrics(ctx, state_fd, ReloadOutcome::Failed, std::nullopt);  // every run is counted
			return EXIT_NOT_READY;
		}
		// The feature licensed on this boot of the host: recorded by an earlier run, or, when none has
		// seen a license yet, asked of nvidia-gridd now (a rotation may land before any run looked).
		seams.licensed_feature = [&ctx, state_fd, &units]() -> std::optional<int> {
			if (auto f = licensed_feature_this_boot(ctx, state_fd))
				return f;
			const GriddView now = observe_gridd(ctx, **units, read_license_counters(ctx, state_fd));
			if (now.observation.state != LicenseState::Licensed || !host_boot(ctx).known())
				return std::nullopt;
			return installed_feature(ctx);
		};
		report = LicenseReloader(ctx, **units, seams).run();
		// After the run, whatever it did: the state of the nvidia-gridd that runs now. Observed
		// only, and after every decision of the run is taken (doc/how-it-works.md: licensing you can see).
		if (report)
			gridd = observe_gridd(ctx, **units, read_license_counters(ctx, state_fd));
	}
	if (!report) {
		log::error(report.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		notify_status("Failed: " + report.error().message);
		record_license_metrics(ctx, state_fd, ReloadOutcome::Failed, gridd);
		return report.error().exit_code;
	}
	record_license_metrics(ctx, state_fd, report->outcome, gridd, report->held_back);
	notify_status(std::string("Last run: ") + outcome_name(report->outcome) +
		      (report->restarts ? ", " + std::to_string(report->restarts) + " nvidia-gridd restart(s)" : ""));
	switch (report->outcome) {
	case ReloadOutcome::RolledBack:
	case ReloadOutcome::Failed:
		return EXIT_NOT_READY;
	default:
		return EXIT_READY;
	}
}

int run(int argc, char **argv)
{
	log::init("unbounded-nvidia-license-reload", /*allow_journal=*/true);
	Args args;
	if (int r = parse_args(argc, argv, args); r != 0)
		return r < 0 ? EXIT_READY : r;
	if (args.npd)  // the one line on stdout must not share a terminal with log lines
		log::keep_stderr_off_terminal();
	Context ctx;
	if (auto rc = load_context(args, ctx))
		return *rc;
	if (args.npd)
		return args.npd_reboot ? npd_reboot(ctx) : npd_license(ctx);

	struct sigaction sa = {};
	sa.sa_handler = on_signal;
	::sigaction(SIGTERM, &sa, nullptr);
	::sigaction(SIGINT, &sa, nullptr);

	// The state directory keeps copies of the token: only root may even list it, and only root may
	// have written what it holds (a forged "applied" record would suppress a rotation).
	const std::string &state_dir = ctx.config.licensing.state_dir;
	auto state = fs::open_private_dir(ctx.real(state_dir), state_dir, 0700);
	if (!state) {
		log::error(state.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return EXIT_NOT_READY;
	}
	auto lock = RunLock::acquire(state->get(), "lock", fs::join(state_dir, "lock"), [](RunLock::Holder) {
		log::notice("Another license reload is running, waiting for it.");
	});
	if (!lock) {
		log::error(lock.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return EXIT_NOT_READY;
	}
	return reload(ctx, args.boot, state->get());
}

}  // namespace

int main(int argc, char **argv)
{
	return guarded_main("unbounded-nvidia-license-reload", [&] { return run(argc, argv); });
}
