// unbounded-nvidia-setup: command-line parsing and dispatch only; the work is in the commands.
#include "build_config.h"
#include "commands.hpp"
#include "config.hpp"
#include "context.hpp"
#include "credentials.hpp"
#include "execute.hpp"
#include "log.hpp"
#include "self_repair.hpp"
#include "version.hpp"
#include "main_guard.hpp"
#include "setup_report.hpp"
#include "bounded_parse.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <getopt.h>
#include <iostream>

using namespace unbounded;

namespace {

struct Args {
	std::string root, config, output = "-", command = "setup";
	std::string npd;  // verify --npd[=CONDITION]: node-problem-detector's custom plugin protocol
	bool json = false, config_given = false, boot = false;
};

// What a command line may name: each command, how it runs, its line in --help, the options only it
// takes, and what the run leaves behind besides its answer.
enum VerbOption : unsigned {
	TAKES_OUTPUT = 1,
	TAKES_NPD = 2,
	TAKES_BOOT = 4,
};
struct Verb {
	const char *name;
	int (*run)(const Context &ctx, Report &report, const Args &args);
	const char *help;      // continuation lines start with 18 spaces, under the first one's text
	unsigned options = 0;  // VerbOption
	bool records = false;  // the consumer check and status.json (setup and refresh)
	bool metrics = false;  // the textfile collector's metrics
};

const Verb VERBS[] = {
	{"setup", [](const Context &c, Report &r, const Args &a) { return run_setup(c, r, a.boot); },
	 "build the driver root, write the CDI spec, verify (default)", TAKES_BOOT, true, true},
	{"refresh", [](const Context &c, Report &r, const Args &) { return run_refresh(c, r); },
	 "apply host driver changes while the machine runs: wait until staging\n"
	 "                  is quiet, then build, swap or keep the root as the kernel module allows",
	 0, true, true},
	{"verify", [](const Context &c, Report &r, const Args &) { return run_verify(c, r); },
	 "check the live state without changing it", TAKES_NPD},
	{"cleanup", [](const Context &c, Report &r, const Args &) { return run_cleanup(c, r); },
	 "remove the CDI spec setup wrote (a machine without NVIDIA GPUs now)", 0, false, true},
	{"generate-cdi", [](const Context &c, Report &r, const Args &a) { return run_generate_cdi(c, r, a.output); },
	 "print the CDI spec for the current driver root", TAKES_OUTPUT},
};

const Verb *find_verb(const std::string &name)
{
	for (const Verb &v : VERBS)
		if (name == v.name)
			return &v;
	return nullptr;
}

void print_help()
{
	std::string commands;
	for (const Verb &v : VERBS) {
		char line[32];
		std::snprintf(line, sizeof line, "  %-16s", v.name);
		commands += line + std::string(v.help) + "\n";
	}
	std::printf("Usage: unbounded-nvidia-setup [--root DIR] [--config FILE] [--json] [COMMAND]\n"
		    "       unbounded-nvidia-setup setup --boot\n"
		    "       unbounded-nvidia-setup verify [--json|--npd[=CONDITION]]\n"
		    "       unbounded-nvidia-setup generate-cdi [--output FILE|-]\n\n"
		    "Builds the NVIDIA driver root and CDI spec of a Kubernetes GPU machine.\n\n"
		    "Commands:\n"
		    "%s\n"
		    "Options:\n"
		    "  --root DIR      take every absolute path relative to DIR (also $UNBOUNDED_NVIDIA_ROOT)\n"
		    "  --config FILE   configuration file (default %s under the root)\n"
		    "  --json          print one JSON object describing the result on stdout\n"
		    "  --boot          setup: the boot unit's run: try again while the host is not ready (up to\n"
		    "                  staging_timeout), record the units a failure holds back for the refresh;\n"
		    "                  containerd is not asked about its configuration (verify asks it)\n"
		    "  --output FILE   generate-cdi: write the spec to FILE ('-' for stdout, the default)\n"
		    "  --npd[=CONDITION]\n"
		    "                  verify: node-problem-detector plugin protocol (exit 0 OK, 1 problem,\n"
		    "                  2 unknown; one line): CONDITION ready (default: the problem is not ready) or\n"
		    "                  outcomes separated by commas (not-ready, staging-gone, staging-inconsistent,\n"
		    "                  pending-host-reboot, gpus-missing)\n"
		    "  -h --help       show this help\n"
		    "  --version       show the release and the commit it was built from\n\n"
		    "Exit status: 0 ready (or nothing to do), 1 not ready, 2 usage or configuration error.\n\n"
		    "See unbounded-nvidia-setup(8).\n",
		    commands.c_str(), std::string(DEFAULT_CONFIG_PATH).c_str());
}

std::vector<std::string> split_npd_outcomes(const std::string &list)
{
	std::vector<std::string> out;
	std::size_t start = 0;
	for (;;) {
		const auto comma = list.find(',', start);
		out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
		if (comma == std::string::npos)
			return out;
		start = comma + 1;
	}
}

// The options and the command, as given; 0 to go on, -1 for a clean exit (--help, --version), else
// the exit status.
int read_options(int argc, char **argv, Args &a)
{
	enum {
		OPT_ROOT = 0x100,
		OPT_CONFIG,
		OPT_JSON,
		OPT_OUTPUT,
		OPT_VERSION,
		OPT_NPD,
		OPT_BOOT,
	};
	static const option opts[] = {
		{"root", required_argument, nullptr, OPT_ROOT},
		{"config", required_argument, nullptr, OPT_CONFIG},
		{"json", no_argument, nullptr, OPT_JSON},
		{"output", required_argument, nullptr, OPT_OUTPUT},
		{"npd", optional_argument, nullptr, OPT_NPD},
		{"boot", no_argument, nullptr, OPT_BOOT},
		{"help", no_argument, nullptr, 'h'},
		{"version", no_argument, nullptr, OPT_VERSION},
		{nullptr, 0, nullptr, 0},
	};
	opterr = 0;
	bool command_given = false;
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, nullptr)) >= 0 || optind < argc) {
		if (c < 0) {
			// A command; options may follow it ("verify --json").
			if (command_given || std::string(argv[optind]) == "") {
				std::fprintf(stderr, "unbounded-nvidia-setup: unexpected argument '%s'\n", argv[optind]);
				return EXIT_USAGE;
			}
			a.command = argv[optind++];
			command_given = true;
			if (!find_verb(a.command)) {
				std::fprintf(stderr, "unbounded-nvidia-setup: unknown command '%s' (see --help)\n", a.command.c_str());
				return EXIT_USAGE;
			}
			continue;
		}
		switch (c) {
		case OPT_ROOT: a.root = optarg; break;
		case OPT_CONFIG:
			a.config = optarg;
			a.config_given = true;
			break;
		case OPT_JSON: a.json = true; break;
		case OPT_OUTPUT: a.output = optarg; break;
		case OPT_NPD: a.npd = optarg ? optarg : "ready"; break;
		case OPT_BOOT: a.boot = true; break;
		case 'h': print_help(); return -1;
		case OPT_VERSION: print_version("unbounded-nvidia-setup"); return -1;
		default:
			std::fprintf(stderr, "unbounded-nvidia-setup: unknown or incomplete option '%s' (see --help)\n",
				     argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	return 0;
}

// "ready", or outcomes separated by commas: one rule per node condition (a monitor whose rules
// share a condition flaps under node-problem-detectors that apply results one at a time).
bool npd_condition_known(const std::string &npd)
{
	if (npd == "ready")
		return true;
	for (const auto &o : split_npd_outcomes(npd))
		if (o != "not-ready" && o != "staging-gone" && o != "staging-inconsistent" && o != "pending-host-reboot" && o != "gpus-missing")
			return false;
	return true;
}

// The options against the command they apply to; 0 or EXIT_USAGE.
int check_options(const Args &a)
{
	const Verb &verb = *find_verb(a.command);
	if (!a.npd.empty() && (!(verb.options & TAKES_NPD) || a.json || !npd_condition_known(a.npd))) {
		std::fprintf(stderr, "unbounded-nvidia-setup: --npd[=ready|not-ready|staging-gone|staging-inconsistent|"
				     "pending-host-reboot|gpus-missing] applies to verify, without --json\n");
		return EXIT_USAGE;
	}
	if (a.json && (verb.options & TAKES_OUTPUT) && a.output == "-") {
		std::fprintf(stderr, "unbounded-nvidia-setup: generate-cdi --json needs --output FILE (stdout carries the JSON)\n");
		return EXIT_USAGE;
	}
	if (a.boot && !(verb.options & TAKES_BOOT)) {
		std::fprintf(stderr, "unbounded-nvidia-setup: --boot only applies to setup\n");
		return EXIT_USAGE;
	}
	if (a.output != "-" && !(verb.options & TAKES_OUTPUT)) {
		std::fprintf(stderr, "unbounded-nvidia-setup: --output only applies to generate-cdi\n");
		return EXIT_USAGE;
	}
	return 0;
}

// VmHWM of this process image (getrusage's ru_maxrss would include the parent's memory from before
// the exec when we were spawned with vfork, as Python and systemd do).
long peak_rss_kib()
{
	auto status = fs::read_file("/proc/self/status", 64 * 1024);
	if (!status)
		return -1;
	auto pos = status->find("VmHWM:");
	return pos == std::string::npos ? -1 : std::strtol(status->c_str() + pos + 6, nullptr, 10);
}

// node-problem-detector's custom plugin protocol: exit 0 OK, 1 the problem (the condition is true),
// 2 unknown; one short line on stdout (NPD keeps at most max_output_length, 80 in our monitor config).
// CONDITION "ready": the problem is "not ready"; an outcome ("staging-gone", "pending-host-reboot",
// ...): the problem is that outcome, so a monitor can give each its own condition reason.
int npd_answer(const Report &report, const std::string &condition, int rc)
{
	if (rc == EXIT_USAGE || report.outcome.empty()) {
		std::printf("unknown: verify could not run (see the journal)\n");
		return 2;
	}
	std::string line = report.outcome;
	const RunFacts &f = report.facts;
	if (!report.problems.empty())
		line += ": " + report.problems.front().message;
	else if (report.outcome == "pending-host-reboot" && f.staged_driver_version)
		line += ": host staged " + *f.staged_driver_version + ", live " + f.driver_version.value_or("");
	else if (f.driver_version)
		line += ": driver " + *f.driver_version;
	std::printf("%s\n", log::npd_line(line).c_str());
	if (condition == "ready")
		return report.ready() ? 0 : 1;
	const auto outcomes = split_npd_outcomes(condition);
	return std::find(outcomes.begin(), outcomes.end(), report.outcome) != outcomes.end() ? 1 : 0;
}

int run(int argc, char **argv)
{
	log::init("unbounded-nvidia-setup", /*allow_journal=*/true);
	Args args;
	if (int r = read_options(argc, argv, args); r != 0 || (r = check_options(args)) != 0)
		return r < 0 ? EXIT_READY : r;

	if (args.json || !args.npd.empty())
		log::keep_stderr_off_terminal();
	Context ctx;
	ctx.root = effective_root(args.root);
	if (!ctx.root.empty()) {
		struct stat st = {};
		if (::stat(ctx.root.c_str(), &st) < 0 || !S_ISDIR(st.st_mode)) {
			log::error("--root " + printable(ctx.root) + " is not a directory" +
				   (args.root.empty() ? " (from $UNBOUNDED_NVIDIA_ROOT)" : ""));
			return EXIT_USAGE;
		}
	}
	log::set_machine_root(ctx.root);
	if (args.json && (ctx.root.empty() || ctx.root == "/") && std::getenv("INVOCATION_ID") && !log::journal_connected())
		log::also_journal();
	const std::string config_path = args.config_given ? args.config : ctx.real(DEFAULT_CONFIG_PATH);
	// The host's settings override the image's file; its kill switch wins over both (credentials.hpp).
	std::vector<std::string> ignored;
	auto cfg = load_machine_config(config_path, args.config_given, ctx.root, std::getenv("CREDENTIALS_DIRECTORY"), ignored);
	for (const auto &w : ignored)
		log::warning(w);
	const Verb &verb = *find_verb(args.command);
	Report report;
	report.command = args.command;
	const auto start = std::chrono::steady_clock::now();
	int rc;
	if (!cfg) {
		// node-problem-detector reads one line in every case: "unknown", and why.
		if (!args.npd.empty()) {
			log::error(cfg.error().message);
			std::printf("%s\n", log::npd_line("unknown: " + cfg.error().message).c_str());
			return EXIT_USAGE;
		}
		// Every run has an outcome: a configuration error is a failed run, said in the journal, the
		// JSON, status.json and the metrics, which go where the defaults say.
		rc = finish_failed(ctx, report, cfg.error());
		// A boot that fails on its configuration holds containerd and kubelet back like any other
		// failed boot (recorded), so the first refresh after the file is fixed starts them.
		if (args.boot)
			note_held_back(ctx, report);
	} else {
		ctx.config = std::move(*cfg);
		rc = verb.run(ctx, report, args);
	}
	report.timings_ms["total"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

	if (verb.records && report.ready() && report.outcome != "no-gpu")
		record_consumer(ctx, report, /*verify=*/false, &report.specs_in_place, /*ask_runtime=*/!args.boot);
	if (verb.metrics)
		record_metrics(ctx, report, report.timings_ms["total"].get<double>() / 1000.0, held_back_count(ctx));
	// The whole run's peak, the metrics write included (a full textfile directory once set it).
	report.details["peak_rss_kib"] = peak_rss_kib();
	if (verb.records)
		record_status(ctx, report);
	if (!args.npd.empty())
		return npd_answer(report, args.npd, rc);
	if (args.json)
		std::cout << report.to_json() << std::flush;
	return rc;
}

}  // namespace

int main(int argc, char **argv)
{
	return guarded_main("unbounded-nvidia-setup", [&] { return run(argc, argv); });
}
