// unbounded-nvidia-host: the host's half. Runs on the host as root, never in a machine.
//   binds MACHINE   writes (or prints, or checks) what MACHINE needs bound: host_binds.hpp
//   check           the host's preflight: preflight.hpp
#include "context.hpp"
#include "fs.hpp"
#include "format.hpp"
#include "host_binds.hpp"
#include "live_apply.hpp"
#include "lock.hpp"
#include "machine_files.hpp"
#include "version.hpp"
#include "virt.hpp"
#include "main_guard.hpp"
#include "nspawn_settings.hpp"
#include "preflight.hpp"

#include <cstdio>
#include <getopt.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace unbounded;
using namespace unbounded::host;

namespace {

constexpr const char *PROGRAM = "unbounded-nvidia-host";

void help()
{
	std::printf("Usage: %s [--root DIR] [--json] binds MACHINE [--unit NAME] [--gpus LIST] [--licensing DIR] [--credentials] "
		    "[--enabled=V] [--no-optix] [--print|--check|--apply]\n"
		    "       %s [--root DIR] [--json] check\n"
		    "       %s --version\n\n"
		    "The host's half of unbounded-nvidia-setup: run on the host, as root.\n\n"
		    "Commands:\n"
		    "  binds MACHINE   write /etc/systemd/nspawn/MACHINE.nspawn's binds (the other lines of the file nspawn\n"
		    "                  reads kept), the DeviceAllow= drop-in of systemd-nspawn@MACHINE.service and the\n"
		    "                  machine's settings, from the driver the loaded module belongs to and this host's\n"
		    "                  device nodes; all of them or none\n"
		    "  check           the host's preflight: GPUs bound to nvidia, modules, nodes, versions, firmware, daemons\n\n"
		    "Options:\n"
		    "  --root DIR      take every absolute path relative to DIR (also $UNBOUNDED_NVIDIA_ROOT)\n"
		    "  --json          print one JSON object on stdout\n"
		    "  --unit NAME     the service that runs MACHINE, for its DeviceAllow= drop-in (default\n"
		    "                  systemd-nspawn@MACHINE.service)\n"
		    "  --gpus LIST     give MACHINE only these GPUs: indices, UUIDs or PCI addresses, comma-separated\n"
		    "  --licensing DIR bind DIR (the vGPU licensing files) read-only at /run/host-nvidia-licensing\n"
		    "  --credentials   pass expected_gpus and gpus (the GPUs given) to the machine as settings\n"
		    "  --enabled=V     pass enabled (yes, no or auto: the host's kill switch) as a setting\n"
		    "  --no-optix      leave OptiX's data file out, as the machine's `nvoptix: false`\n"
		    "  --print         print the files' lines instead of writing them\n"
		    "  --check         compare the files with what is needed; name each missing or superfluous line\n"
		    "  --apply         give the running machine the files' binds, device permissions and settings without a\n"
		    "                  restart, then run its refresh; what only a restart applies is named, nothing written\n"
		    "  -h, --help      show this help\n"
		    "  --version       show the release and the commit it was built from\n\n"
		    "Exit status: 0 done, up to date, applied or ready, 1 not ready, differing (--check) or not applied live, 2 usage error.\n"
		    "See unbounded-nvidia-host(8).\n",
		    PROGRAM, PROGRAM, PROGRAM);
}

struct Args {
	std::string root;
	bool json = false;
	std::string command;
	BindsOptions binds;
	std::string unit;
	bool print = false, check = false, apply = false;
};

std::vector<std::string> split_list(const std::string &s)
{
	std::vector<std::string> out;
	std::size_t pos = 0;
	while (pos <= s.size()) {
		auto comma = s.find(',', pos);
		if (comma == std::string::npos)
			comma = s.size();
		if (comma > pos)
			out.push_back(s.substr(pos, comma - pos));
		pos = comma + 1;
	}
	return out;
}

// What is wrong with the command line as a whole, or nullptr.
const char *usage_problem(const Args &a)
{
	const bool binds = a.command == "binds";
	return a.command != "binds" && a.command != "check" ? "a command is needed: binds or check"
	       : binds && a.binds.machine.empty()           ? "binds needs a MACHINE name"
	       : binds && !valid_machine_name(a.binds.machine)
		       ? "MACHINE must be a machine name as systemd takes it (labels of letters, digits and '-' joined by '.', "
			 "none empty or starting or ending with '-', at most 64 characters)"
	       : !a.unit.empty() && !valid_service_name(a.unit) ? "--unit takes a service name (NAME.service)"
	       : int(a.print) + int(a.check) + int(a.apply) > 1 ? "--print, --check and --apply exclude each other"
	       : !binds && (a.print || a.check || a.apply || a.binds.credentials || a.binds.enabled || a.binds.licensing || !a.binds.gpus.empty() ||
			    !a.unit.empty())
		       ? "only binds takes --unit, --gpus, --licensing, --credentials, --enabled, --print, --check and --apply"
		       : nullptr;
}

enum HostOption { ROOT = 256,
		  JSON,
		  UNIT,
		  GPUS,
		  LICENSING,
		  CREDENTIALS,
		  ENABLED,
		  NO_OPTIX,
		  PRINT,
		  CHECK,
		  APPLY,
		  VERSION };
const option OPTIONS[] = {
	{"help", no_argument, nullptr, 'h'},
	{"version", no_argument, nullptr, VERSION},
	{"root", required_argument, nullptr, ROOT},
	{"json", no_argument, nullptr, JSON},
	{"unit", required_argument, nullptr, UNIT},
	{"gpus", required_argument, nullptr, GPUS},
	{"licensing", required_argument, nullptr, LICENSING},
	{"credentials", no_argument, nullptr, CREDENTIALS},
	{"enabled", required_argument, nullptr, ENABLED},
	{"no-optix", no_argument, nullptr, NO_OPTIX},
	{"print", no_argument, nullptr, PRINT},
	{"check", no_argument, nullptr, CHECK},
	{"apply", no_argument, nullptr, APPLY},
	{nullptr, 0, nullptr, 0},
};

// One option (getopt_long's answer `c`, its `value`) into `a`: 0 taken, -1 --help or --version
// shown, else the exit status of a usage error (printed).
int take_option(int c, const char *value, Args &a)
{
	switch (c) {
	case 'h':
		help();
		return -1;
	case VERSION:
		print_version(PROGRAM);
		return -1;
	case ROOT:
		a.root = value;
		return 0;
	case JSON:
		a.json = true;
		return 0;
	case UNIT:
		a.unit = value;
		return 0;
	case LICENSING:
		a.binds.licensing = value;
		return 0;
	case GPUS:
		if ((a.binds.gpus = split_list(value)).empty()) {
			// An empty list must never mean every GPU: `--gpus "$GPUS"` with nothing in it.
			std::fprintf(stderr, "%s: --gpus names no GPU (see --help)\n", PROGRAM);
			return EXIT_USAGE;
		}
		return 0;
	case CREDENTIALS:
		a.binds.credentials = true;
		return 0;
	case ENABLED:
		a.binds.enabled = value;
		if (*a.binds.enabled != "yes" && *a.binds.enabled != "no" && *a.binds.enabled != "auto") {
			std::fprintf(stderr, "%s: --enabled takes yes, no or auto, not '%s'\n", PROGRAM, value);
			return EXIT_USAGE;
		}
		return 0;
	case NO_OPTIX:
		a.binds.nvoptix = false;
		return 0;
	default:
		(c == PRINT ? a.print : c == CHECK ? a.check
						   : a.apply) = true;
		return 0;
	}
}

// 0 parsed, -1 --help shown, else the exit status of a usage error (printed). getopt_long permutes:
// the command and MACHINE may come anywhere among the options.
int parse_args(int argc, char **argv, Args &a)
{
	opterr = 0;  // our own messages, naming the argument as given
	for (int c; (c = getopt_long(argc, argv, ":h", OPTIONS, nullptr)) >= 0;) {
		if (c == ':' || c == '?') {
			std::fprintf(stderr, c == ':' ? "%s: %s needs a value\n" : "%s: unknown argument '%s' (see --help)\n", PROGRAM,
				     argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (int r = take_option(c, optarg, a); r != 0)
			return r;
	}
	for (int i = optind; i < argc; i++) {
		if (a.command.empty())
			a.command = argv[i];
		else if (a.command == "binds" && a.binds.machine.empty())
			a.binds.machine = argv[i];
		else {
			std::fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", PROGRAM, argv[i]);
			return EXIT_USAGE;
		}
	}
	if (const char *problem = usage_problem(a)) {
		std::fprintf(stderr, "%s: %s (see --help)\n", PROGRAM, problem);
		return EXIT_USAGE;
	}
	return 0;
}

// An error that ends the command, on stderr; its exit status.
int failed(const Error &e, int exit_code)
{
	std::fprintf(stderr, "%s\n", e.message.c_str());
	return exit_code;
}

std::string nspawn_text(const std::vector<SettingLine> &lines)
{
	std::string s, section;
	for (const auto &l : lines) {
		if (l.section != section)
			s += (s.empty() ? "[" : "\n[") + l.section + "]\n";
		section = l.section;
		s += l.text() + "\n";
	}
	return s;
}

int report_binds(const Args &a, const MachineFiles &f, const HostBinds &b, const nlohmann::json &extra)
{
	for (const auto *list : {&b.warnings, &b.device_warnings})
		for (const auto &w : *list)
			std::fprintf(stderr, "warning: %s\n", w.c_str());
	if (a.json) {
		auto settings = nlohmann::json::object(), ours = nlohmann::json::array(), file = nlohmann::json::array();
		for (const auto &[name, value] : b.settings)
			settings[name] = value;
		for (const auto &l : b.nspawn)
			ours.push_back("[" + l.section + "] " + l.text());
		// The settings file as systemd reads it, line by line, with the lines binds owns marked.
		for (const auto &l : setting_lines(merge_settings(f.base_text, b.nspawn)))
			file.push_back({{"section", l.section}, {"key", l.key}, {"value", l.value}, {"ours", owned(l)}});
		nlohmann::json j = {{"machine", a.binds.machine},
				    {"unit", f.unit},
				    {"files", {{"nspawn", f.nspawn}, {"nspawn_read", f.base.empty() ? nlohmann::json() : nlohmann::json(f.base)}, {"dropin", f.dropin}, {"settings", f.settings}}},
				    {"driver_version", b.driver_version},
				    {"staging", b.staging},
				    {"nspawn", ours},
				    {"nspawn_lines", file},
				    {"device_allow", b.device_allow},
				    {"settings", settings},
				    {"warnings", b.warnings},
				    {"device_warnings", b.device_warnings},
				    {"notes", b.notes}};
		j.update(extra);
		std::printf("%s\n", j.dump(1).c_str());
	}
	return extra.value("up_to_date", true) ? EXIT_READY : EXIT_NOT_READY;
}

int check_binds(const Context &ctx, const Args &a, const MachineFiles &f, const HostBinds &b)
{
	const auto lines = file_differences(ctx, f, b);
	if (!a.json)
		for (const auto &l : lines)
			std::printf("%s\n", l.c_str());
	return report_binds(a, f, b, {{"up_to_date", lines.empty()}, {"differences", lines}});
}

void print_live(const std::string &machine, const LiveResult &live)
{
	for (const auto &d : live.done)
		std::printf("%s: %s\n", machine.c_str(), d.c_str());
	for (const auto &n : live.not_live)
		std::printf("Not applied live: %s\n", n.c_str());
	if (live.state == "not-running")
		std::printf("%s is not running: the binds apply when it starts.\n", machine.c_str());
	else if (live.state == "not-live")
		std::printf("Nothing was written or changed: run binds without --apply, then restart %s (machinectl reboot %s).\n", machine.c_str(),
			    machine.c_str());
	else if (live.state == "applied" && !live.refresh.empty())
		std::printf("%s: unbounded-nvidia-refresh.service finished.\n", machine.c_str());
	else if (live.state == "applied")
		std::printf("%s has these binds already.\n", machine.c_str());
	if (!live.error.empty())
		std::fprintf(stderr, "%s\n", live.error.c_str());
}

nlohmann::json live_json(const LiveResult &live)
{
	return {{"state", live.state},
		{"changed", live.done},
		{"not_live", live.not_live},
		{"refresh", live.refresh.empty() ? nlohmann::json() : nlohmann::json(live.refresh)},
		{"error", live.error.empty() ? nlohmann::json() : nlohmann::json(live.error)}};
}

int write_binds(const Context &ctx, const Args &a, const MachineFiles &f, const HostBinds &b)
{
	auto changes = planned_files(ctx, f, b);
	if (!changes)
		return failed(changes.error(), EXIT_NOT_READY);
	const auto print_written = [&](const std::vector<std::string> &done) {
		if (!a.json)
			for (const auto &path : done)
				std::printf("%s %s\n",
					    std::any_of(changes->begin(), changes->end(), [&](const FileChange &c) { return c.path == path && !c.text; }) ? "Removed"
																			  : "Wrote",
					    path.c_str());
	};
	if (a.apply) {
		const auto live = apply_live(f, b, [&] { return commit_files(ctx, *changes); });
		print_written(live.written);
		if (!a.json)
			print_live(a.binds.machine, live);
		const int rc = report_binds(a, f, b, {{"changed", !live.written.empty()}, {"written", live.written}, {"live", live_json(live)}});
		return live.state == "applied" || live.state == "not-running" ? rc : EXIT_NOT_READY;
	}
	auto done = commit_files(ctx, *changes);
	if (!done)
		return failed(done.error(), EXIT_NOT_READY);
	print_written(*done);
	if (!a.json)
		std::printf(!done->empty() ? "Run `systemctl daemon-reload`, then restart the machine (machinectl reboot %s), or run binds --apply, for "
					     "the binds to apply.\n"
					   : "%s's binds are up to date.\n",
			    a.binds.machine.c_str());
	return report_binds(a, f, b, {{"changed", !done->empty()}, {"written", *done}});
}

// A plain re-run (automation after a driver upgrade) must not lift the host's kill switch: an
// enabled setting already written is kept unless --enabled says otherwise.
void keep_kill_switch(const Context &ctx, const MachineFiles &f, Args &a)
{
	if (a.binds.enabled)
		return;
	auto text = fs::read_file(ctx.real(f.settings + "/unbounded-nvidia.enabled"), 64);
	const std::string v = text ? std::string(trim_blanks(*text)) : std::string();
	if (v == "yes" || v == "no" || v == "auto") {
		a.binds.enabled = v;
		if (!a.json && !a.check)
			std::fprintf(stderr, "Keeping %s's enabled=%s (pass --enabled= to change it).\n", a.binds.machine.c_str(), v.c_str());
	}
}

int run_binds(const Context &ctx, Args a)
{
	if (a.apply && !ctx.root.empty()) {
		std::fprintf(stderr, "%s: --apply changes this host's running machine: not with --root or $UNBOUNDED_NVIDIA_ROOT\n", PROGRAM);
		return EXIT_USAGE;
	}
	auto f = locate_machine_files(ctx, a.binds.machine, a.unit, /*writing=*/!a.print && !a.check);
	if (!f)
		return failed(f.error(), f.error().exit_code);
	keep_kill_switch(ctx, *f, a);
	auto b = plan_binds(ctx, a.binds);
	if (!b)
		return failed(b.error(), b.error().exit_code);
	if (a.check)
		return check_binds(ctx, a, *f, *b);
	if (a.print) {
		if (!a.json) {
			std::printf("# %s\n%s\n# %s\n%s", f->nspawn.c_str(), nspawn_text(b->nspawn).c_str(), f->dropin.c_str(), device_allow_dropin(*b).c_str());
			for (const auto &[name, value] : b->settings)
				std::printf("\n# %s/%s\n%s\n", f->settings.c_str(), name.c_str(), value.c_str());
		}
		return report_binds(a, *f, *b, nlohmann::json::object());
	}
	// One binds at a time: each removes the temporary files a killed run left, which another's are.
	const std::string lock_dir = "/run/lock";
	auto made = fs::mkdir_p(ctx.real(lock_dir), 0755);
	auto dir = made ? fs::open_dir(ctx.real(lock_dir)) : fail(made.error());
	auto lock = dir ? RunLock::acquire(dir->get(), "unbounded-nvidia-host.lock", lock_dir + "/unbounded-nvidia-host.lock") : fail(dir.error());
	if (!lock)
		return failed(lock.error(), EXIT_NOT_READY);
	return write_binds(ctx, a, *f, *b);
}

int run_check(const Context &ctx, const Args &a)
{
	const auto p = run_preflight(ctx);
	if (a.json) {
		auto findings = nlohmann::json::array();
		for (const auto &f : p.findings)
			findings.push_back({{"severity", f.error ? "error" : "warning"}, {"check", f.check}, {"message", f.message}});
		nlohmann::json j = {{"ready", p.ready()}, {"driver_version", p.driver_version}, {"findings", findings}};
		std::printf("%s\n", j.dump(1).c_str());
	} else {
		for (const auto &f : p.findings)
			std::printf("%s: %s: %s\n", f.error ? "error" : "warning", f.check.c_str(), f.message.c_str());
		std::printf(p.ready() ? "Host ready for GPU machines (driver %s)\n" : "Host not ready for GPU machines\n", p.driver_version.c_str());
	}
	return p.ready() ? EXIT_READY : EXIT_NOT_READY;
}

}  // namespace

int main(int argc, char **argv)
{
	return guarded_main(PROGRAM, [&] {
		Args a;
		if (int r = parse_args(argc, argv, a); r != 0)
			return r < 0 ? EXIT_READY : r;
		Context ctx;
		ctx.root = effective_root(a.root);
		// The host's half: inside a machine it would write a machine's /etc as if it were a host's.
		std::string why;
		const char *virt = std::getenv("SYSTEMD_VIRTUALIZATION");
		if (ctx.root.empty())
			if (auto in = container_manager("", virt ? std::optional<std::string>(virt) : std::nullopt, why)) {
				std::fprintf(stderr, "%s: this is a container (%s), not a host: run it on the host (or give --root)\n", PROGRAM,
					     in->c_str());
				return static_cast<int>(EXIT_USAGE);
			}
		return a.command == "binds" ? run_binds(ctx, a) : run_check(ctx, a);
	});
}
