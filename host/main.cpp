// unbounded-nvidia-host: the host's half. Runs on the host as root, never in a machine.
//   binds MACHINE   writes (or prints, or checks) what MACHINE needs bound: host_binds.hpp
//   check           the host's preflight: preflight.hpp
#include "context.hpp"
#include "fs.hpp"
#include "host_binds.hpp"
#include "main_guard.hpp"
#include "nspawn_settings.hpp"
#include "preflight.hpp"

#include <cstdio>
#include <algorithm>
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
	std::printf("Usage: %s [--root DIR] [--json] binds MACHINE [--gpus LIST] [--licensing DIR] [--credentials] [--enabled=V] "
		    "[--no-optix] [--print|--check]\n"
		    "       %s [--root DIR] [--json] check\n\n"
		    "The host's half of unbounded-nvidia-setup: run on the host, as root.\n\n"
		    "Commands:\n"
		    "  binds MACHINE   write /etc/systemd/nspawn/MACHINE.nspawn's binds (its other lines kept) and the\n"
		    "                  DeviceAllow= drop-in of systemd-nspawn@MACHINE.service, from the driver the\n"
		    "                  loaded module belongs to and this host's device nodes\n"
		    "  check           the host's preflight: GPUs bound to nvidia, modules, nodes, versions, firmware, daemons\n\n"
		    "Options:\n"
		    "  --root DIR      take every absolute path relative to DIR (also $UNBOUNDED_NVIDIA_ROOT)\n"
		    "  --json          print one JSON object on stdout\n"
		    "  --gpus LIST     give MACHINE only these GPUs: indices, UUIDs or PCI addresses, comma-separated\n"
		    "  --licensing DIR bind DIR (the vGPU licensing files) read-only at /run/host-nvidia-licensing\n"
		    "  --credentials   pass expected_gpus and gpus (the GPUs given) to the machine as credentials\n"
		    "  --enabled=V     pass enabled (yes, no or auto: the host's kill switch) as a credential\n"
		    "  --no-optix      leave OptiX's data file out, as the machine's `nvoptix: false`\n"
		    "  --print         print the files' lines instead of writing them\n"
		    "  --check         compare the files with what is needed; name each missing or superfluous line\n"
		    "  -h, --help      show this help\n\n"
		    "Exit status: 0 done, up to date or ready, 1 not ready or the files differ (--check), 2 usage error.\n"
		    "See unbounded-nvidia-host(8).\n",
		    PROGRAM, PROGRAM);
}

struct Args {
	std::string root;
	bool json = false;
	std::string command;
	BindsOptions binds;
	bool print = false, check = false;
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

// 0 parsed, -1 --help shown, else the exit status of a usage error (printed).
int parse_args(int argc, char **argv, Args &a)
{
	const auto value = [&](int &i, const char *name) -> const char * {
		if (i + 1 >= argc) {
			std::fprintf(stderr, "%s: %s needs a value\n", PROGRAM, name);
			return nullptr;
		}
		return argv[++i];
	};
	for (int i = 1; i < argc; i++) {
		const std::string arg = argv[i];
		const char *v = nullptr;
		if (arg == "-h" || arg == "--help") {
			help();
			return -1;
		} else if (arg == "--json") {
			a.json = true;
		} else if (arg == "--root" || arg == "--gpus" || arg == "--licensing") {
			if (!(v = value(i, arg.c_str())))
				return EXIT_USAGE;
			if (arg == "--root")
				a.root = v;
			else if (arg == "--licensing")
				a.binds.licensing = v;
			else if ((a.binds.gpus = split_list(v)).empty()) {
				// An empty list must never mean every GPU: `--gpus "$GPUS"` with nothing in it.
				std::fprintf(stderr, "%s: --gpus names no GPU (see --help)\n", PROGRAM);
				return EXIT_USAGE;
			}
		} else if (arg == "--credentials") {
			a.binds.credentials = true;
		} else if (arg.starts_with("--enabled=")) {
			a.binds.enabled = arg.substr(10);
			if (*a.binds.enabled != "yes" && *a.binds.enabled != "no" && *a.binds.enabled != "auto") {
				std::fprintf(stderr, "%s: --enabled takes yes, no or auto, not '%s'\n", PROGRAM, a.binds.enabled->c_str());
				return EXIT_USAGE;
			}
		} else if (arg == "--no-optix") {
			a.binds.nvoptix = false;
		} else if (arg == "--print") {
			a.print = true;
		} else if (arg == "--check") {
			a.check = true;
		} else if (!arg.starts_with("-") && a.command.empty()) {
			a.command = arg;
		} else if (!arg.starts_with("-") && a.command == "binds" && a.binds.machine.empty()) {
			a.binds.machine = arg;
		} else {
			std::fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", PROGRAM, arg.c_str());
			return EXIT_USAGE;
		}
	}
	const bool binds = a.command == "binds";
	const char *problem = a.command != "binds" && a.command != "check"    ? "a command is needed: binds or check"
			      : binds && a.binds.machine.empty()              ? "binds needs a MACHINE name"
			      : binds && !valid_machine_name(a.binds.machine) ? "MACHINE must be a machine name (letters, digits, '-', '.')"
			      : a.print && a.check                            ? "--print and --check exclude each other"
			      : !binds && (a.print || a.check || a.binds.credentials || a.binds.enabled || a.binds.licensing || !a.binds.gpus.empty())
				      ? "only binds takes --gpus, --licensing, --credentials, --enabled, --print and --check"
				      : nullptr;
	if (problem) {
		std::fprintf(stderr, "%s: %s (see --help)\n", PROGRAM, problem);
		return EXIT_USAGE;
	}
	return 0;
}

std::string nspawn_path(const std::string &m) { return "/etc/systemd/nspawn/" + m + ".nspawn"; }
std::string dropin_dir(const std::string &m) { return "/etc/systemd/system/systemd-nspawn@" + m + ".service.d"; }
constexpr const char *DROPIN_NAME = "50-unbounded-nvidia.conf";

// An existing file of root's /etc, or "" when there is none.
Result<std::string> read_existing(const Context &ctx, const std::string &path)
{
	auto text = fs::read_file(ctx.real(path), 1u << 20);
	if (!text && text.error().errnum == ENOENT)
		return std::string();
	return text;
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

nlohmann::json lines_json(const std::vector<SettingLine> &lines)
{
	auto a = nlohmann::json::array();
	for (const auto &l : lines)
		a.push_back("[" + l.section + "] " + l.text());
	return a;
}

int report_binds(const Args &a, const HostBinds &b, const nlohmann::json &extra)
{
	for (const auto *list : {&b.warnings, &b.device_warnings})
		for (const auto &w : *list)
			std::fprintf(stderr, "warning: %s\n", w.c_str());
	if (a.json) {
		nlohmann::json j = {{"machine", a.binds.machine}, {"driver_version", b.driver_version}, {"staging", b.staging}, {"nspawn", lines_json(b.nspawn)}, {"device_allow", b.device_allow}, {"warnings", b.warnings}, {"device_warnings", b.device_warnings}, {"notes", b.notes}};
		j.update(extra);
		std::printf("%s\n", j.dump(1).c_str());
	}
	return extra.value("up_to_date", true) ? EXIT_READY : EXIT_NOT_READY;
}

// The DeviceAllow= values of a drop-in's text.
std::vector<std::string> owned_device_allow(const std::string &text)
{
	std::vector<std::string> out;
	for (const auto &l : setting_lines(text))
		if (l.section == "Service" && l.key == "DeviceAllow")
			out.push_back(l.value);
	return out;
}

int check_binds(const Context &ctx, const Args &a, const HostBinds &b)
{
	const std::string &m = a.binds.machine;
	auto nspawn = read_existing(ctx, nspawn_path(m));
	auto dropin = read_existing(ctx, dropin_dir(m) + "/" + DROPIN_NAME);
	for (const auto *r : {&nspawn, &dropin})
		if (!*r) {
			std::fprintf(stderr, "%s\n", r->error().message.c_str());
			return EXIT_NOT_READY;
		}
	const auto d = diff_settings(*nspawn, b.nspawn);
	std::vector<std::string> lines;
	for (const auto &l : d.missing)
		lines.push_back("missing in " + nspawn_path(m) + ": [" + l.section + "] " + l.text());
	for (const auto &l : d.superfluous)
		lines.push_back("superfluous in " + nspawn_path(m) + ": [" + l.section + "] " + l.text());
	const std::string dropin_path = dropin_dir(m) + "/" + DROPIN_NAME;
	if (dropin->empty()) {
		lines.push_back(dropin_path + " is missing");
	} else if (*dropin != device_allow_dropin(b)) {
		// The drop-in is ours whole: its DeviceAllow= lines compared both ways, then anything else.
		const std::size_t before = lines.size();
		const auto present = owned_device_allow(*dropin);
		for (const auto &dev : b.device_allow)
			if (std::find(present.begin(), present.end(), dev) == present.end())
				lines.push_back("missing in " + dropin_path + ": DeviceAllow=" + dev);
		for (const auto &dev : present)
			if (std::find(b.device_allow.begin(), b.device_allow.end(), dev) == b.device_allow.end())
				lines.push_back("superfluous in " + dropin_path + ": DeviceAllow=" + dev);
		if (lines.size() == before)
			lines.push_back(dropin_path + " differs from what binds writes");
	}
	if (!a.json)
		for (const auto &l : lines)
			std::printf("%s\n", l.c_str());
	return report_binds(a, b, {{"up_to_date", lines.empty()}, {"differences", lines}});
}

int write_binds(const Context &ctx, const Args &a, const HostBinds &b)
{
	const std::string &m = a.binds.machine;
	auto nspawn = read_existing(ctx, nspawn_path(m));
	if (!nspawn) {
		std::fprintf(stderr, "%s\n", nspawn.error().message.c_str());
		return EXIT_NOT_READY;
	}
	const fs::AtomicWriteOptions opts{0644, true, true, false};
	// Both prepared before either is renamed into place: a full disk changes neither, and the machine
	// never binds a node its device cgroup does not allow.
	std::vector<std::pair<std::string, fs::PreparedWrite>> prepared;
	for (const auto &[dir, name, text] : {std::tuple{std::string("/etc/systemd/nspawn"), m + ".nspawn", merge_settings(*nspawn, b.nspawn)},
					      std::tuple{dropin_dir(m), std::string(DROPIN_NAME), device_allow_dropin(b)}}) {
		const std::string path = dir + "/" + name;
		auto made = fs::mkdir_p(ctx.real(dir), 0755);
		auto w = made ? fs::prepare_file_atomic(ctx.real(path), text, opts) : fail(made.error());
		if (!w) {
			std::fprintf(stderr, "Failed to write %s: %s\n", path.c_str(), w.error().message.c_str());
			return EXIT_NOT_READY;
		}
		prepared.emplace_back(path, std::move(*w));
	}
	bool changed = false;
	for (auto &[path, w] : prepared) {
		const bool written = w.outcome() == fs::WriteOutcome::Written;
		if (auto r = w.commit(); !r) {
			std::fprintf(stderr, "Failed to write %s: %s\n", path.c_str(), r.error().message.c_str());
			return EXIT_NOT_READY;
		}
		changed = changed || written;
		if (written && !a.json)
			std::printf("Wrote %s\n", path.c_str());
	}
	if (!a.json)
		std::printf(changed ? "Run `systemctl daemon-reload`, then restart the machine (machinectl reboot %s) for the binds to apply.\n"
				    : "%s's binds are up to date.\n",
			    m.c_str());
	return report_binds(a, b, {{"changed", changed}});
}

int run_binds(const Context &ctx, const Args &a)
{
	auto b = plan_binds(ctx, a.binds);
	if (!b) {
		std::fprintf(stderr, "%s\n", b.error().message.c_str());
		return b.error().exit_code;
	}
	if (a.check)
		return check_binds(ctx, a, *b);
	if (a.print) {
		if (!a.json)
			std::printf("# %s\n%s\n# %s/%s\n%s", nspawn_path(a.binds.machine).c_str(), nspawn_text(b->nspawn).c_str(),
				    dropin_dir(a.binds.machine).c_str(), DROPIN_NAME, device_allow_dropin(*b).c_str());
		return report_binds(a, *b, nlohmann::json::object());
	}
	return write_binds(ctx, a, *b);
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
		return a.command == "binds" ? run_binds(ctx, a) : run_check(ctx, a);
	});
}
