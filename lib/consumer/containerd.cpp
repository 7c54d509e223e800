#include "containerd.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "cdi_model.hpp"
#include "confined_open.hpp"
#include "fs.hpp"
#include "containerd_config.hpp"
#include "toml_reader.hpp"
#include "crio_config.hpp"
#include "format.hpp"
#include "run_probe.hpp"

#include <algorithm>
#include <map>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {
namespace {

using json = nlohmann::json;

constexpr const char *DPKG_STATUS = "/var/lib/dpkg/status";

// The installed containerd package's version from dpkg's database, read in blocks (the file may be
// megabytes; only the package's own paragraph is kept).
struct PackageVersion {
	std::string package, version;
	std::optional<CdiLibrary> cdi_library;  // when Debian's field names it
	std::string cdi_library_field;          // "Built-Using" or "Static-Built-Using"
};
std::optional<PackageVersion> dpkg_version(int root_fd, std::initializer_list<std::string_view> packages = {"containerd", "containerd.io"})
{
	auto fd = open_confined(root_fd, DPKG_STATUS, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_NONBLOCK | O_NOCTTY, true});
	if (!fd || !fs::require_regular(fd->get(), DPKG_STATUS))
		return std::nullopt;
	std::string pending, package, version, library_field;
	std::optional<CdiLibrary> library;
	bool installed = false;
	std::optional<PackageVersion> found;
	auto line = [&](std::string_view l) {
		if (l.empty()) {
			if (std::find(packages.begin(), packages.end(), package) != packages.end() && installed && !version.empty())
				found = PackageVersion{package, version, library, library_field};
			package.clear(), version.clear(), library.reset(), library_field.clear(), installed = false;
		} else if (l.starts_with("Package: ")) {
			package = std::string(l.substr(9));
		} else if (l.starts_with("Status: ")) {
			installed = l.ends_with(" installed");
		} else if (l.starts_with("Version: ")) {
			version = std::string(l.substr(9));
		} else if (l.starts_with("Built-Using: ") || l.starts_with("Static-Built-Using: ")) {
			if (auto lib = cdi_library_in(l.substr(l.find(' ') + 1))) {
				library = std::move(lib);
				library_field = std::string(l.substr(0, l.find(':')));
			}
		}
	};
	char buf[65536];
	for (;;) {
		const ssize_t n = ::read(fd->get(), buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		pending.append(buf, static_cast<std::size_t>(n));
		std::size_t start = 0, nl;
		while ((nl = pending.find('\n', start)) != std::string::npos) {
			line(std::string_view(pending).substr(start, nl - start));
			start = nl + 1;
		}
		pending.erase(0, start);
		if (pending.size() > 65536)
			pending.clear();  // no field we read is that long
		if (found)
			break;
	}
	if (!found) {
		line(pending);
		line("");
	}
	return found;
}

}  // namespace

std::optional<ContainerdVersion> parse_containerd_version(std::string_view v)
{
	if (auto colon = v.find(':'); colon != std::string_view::npos && colon < 4)
		v.remove_prefix(colon + 1);  // the epoch
	ContainerdVersion out;
	int *parts[] = {&out.major, &out.minor, &out.patch};
	const char *p = v.data(), *end = v.data() + v.size();
	for (int i = 0; i < 3; i++) {
		if (p == end || *p < '0' || *p > '9')  // from_chars would take a sign
			return std::nullopt;
		auto r = std::from_chars(p, end, *parts[i]);
		if (r.ec != std::errc())
			return std::nullopt;
		p = r.ptr;
		if (i < 2) {
			if (p == end || *p != '.')
				return std::nullopt;
			p++;
		}
	}
	out.text = std::to_string(out.major) + "." + std::to_string(out.minor) + "." + std::to_string(out.patch);
	return out;
}

std::optional<CdiLibrary> cdi_library_in(std::string_view built_using)
{
	// Debian's source package of tags.cncf.io/container-device-interface, and its name before the
	// module moved. An entry is "name (= version)", entries are separated by ", ".
	constexpr std::string_view NAMES[] = {"golang-tags.cncf-container-device-interface",
					      "golang-github-container-orchestrated-devices-container-device-interface"};
	while (!built_using.empty()) {
		const std::size_t comma = built_using.find(',');
		std::string_view entry = built_using.substr(0, comma);
		built_using = comma == std::string_view::npos ? std::string_view() : built_using.substr(comma + 1);
		while (!entry.empty() && (entry.front() == ' ' || entry.front() == '\t'))
			entry.remove_prefix(1);
		const std::size_t open = entry.find(" (= ");
		if (open == std::string_view::npos || !entry.ends_with(")"))
			continue;
		const std::string_view name = entry.substr(0, open);
		if (std::find(std::begin(NAMES), std::end(NAMES), name) == std::end(NAMES))
			continue;
		const std::string_view version = entry.substr(open + 4, entry.size() - open - 5);
		const bool debian_version = !version.empty() && version.size() <= 64 && std::isdigit(static_cast<unsigned char>(version.front())) &&
					    std::all_of(version.begin(), version.end(), [](char c) {
						    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '~' ||
							   c == '-' || c == ':';
					    });
		if (!debian_version)
			return std::nullopt;
		return CdiLibrary{std::string(name), std::string(version)};
	}
	return std::nullopt;
}

std::string normalize_run_path(std::string_view path)
{
	std::string p(path);
	while (p.size() > 1 && p.back() == '/')
		p.pop_back();
	if (p == "/var/run" || p.starts_with("/var/run/"))
		p = p.substr(4);
	return p;
}

namespace {

// Only a binary that is root's, a regular file and writable by nobody else is run (a link to one
// resolved inside the root, as the chrooted exec resolves it).
bool runnable(int root, const std::string &bin)
{
	auto fd = open_confined(root, bin, ConfinedOpen{Confinement::InRoot, O_PATH, true});
	struct stat st = {};
	return fd && ::fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
	       (st.st_mode & S_IXUSR);
}

// containerd's version as the binary says it (`containerd --version`: "containerd
// github.com/containerd/containerd v1.7.24 88bf19b...", 2.x's ".../containerd/v2 v2.1.9 ...",
// Docker's "containerd containerd.io 1.7.27 ..."), for a containerd no package database knows (a
// release tarball, an RPM).
std::optional<std::pair<ContainerdVersion, std::string>> binary_version(const Context &ctx, int root, const std::string &bin)
{
	if (!runnable(root, bin))
		return std::nullopt;
	const ProbeResult out = run_program(Probe{bin, {"--version"}, ctx.root, Millis(2000), 4096, 0});
	if (!out.ok())
		return std::nullopt;
	std::string_view text = out.out;
	while (!text.empty()) {
		const auto start = text.find_first_not_of(" \t\n");
		if (start == std::string_view::npos)
			break;
		text.remove_prefix(start);
		const auto word = text.substr(0, text.find_first_of(" \t\n"));
		text.remove_prefix(word.size());
		const auto digits = word.starts_with('v') ? word.substr(1) : word;
		if (!digits.empty() && std::isdigit(static_cast<unsigned char>(digits[0])))
			if (auto v = parse_containerd_version(digits))
				return std::pair(*v, std::string(word));
	}
	return std::nullopt;
}

// A runtime's package as dpkg has it: its version, and the CDI library Debian built it against when
// that is one we know.
void take_package(const PackageVersion &pkg, ContainerdView &view)
{
	view.found = true;
	view.version = parse_containerd_version(pkg.version);
	view.version_source = std::string(DPKG_STATUS) + " (" + pkg.package + " " + printable(pkg.version) + ")";
	if (pkg.cdi_library && !max_cdi_version_for_library(pkg.cdi_library->version).empty()) {
		view.cdi_library = pkg.cdi_library->version;
		view.max_cdi_version_from =
			pkg.cdi_library_field + " of " + pkg.package + " in " + DPKG_STATUS + ": " + pkg.cdi_library->package + " " + view.cdi_library;
	}
}

// Whether containerd is installed, and its version when dpkg knows it, else as its binary says.
// With the CDI library Debian built it against, when the package names it: that library, not the
// one upstream's go.mod names for the version, decides which cdiVersion containerd accepts (trixie's
// 1.7.24 is built with 0.8.0 where upstream's vendors 0.7.0).
void find_containerd(const Context &ctx, int root, ContainerdView &view)
{
	for (const char *bin : {"/usr/bin/containerd", "/usr/local/bin/containerd"}) {
		struct stat st = {};
		if (::fstatat(root, bin + 1, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			view.binary = bin;
			break;
		}
	}
	if (auto pkg = dpkg_version(root)) {
		take_package(*pkg, view);
	} else if (!view.binary.empty()) {
		view.found = true;
		view.version_source = view.binary;
		if (auto v = binary_version(ctx, root, view.binary)) {
			view.version = v->first;
			view.version_source = view.binary + " --version (" + printable(v->second) + ")";
		}
	}
}

// CRI-O as the runtime (no containerd): CDI always on, its spec directories from its own files.
void read_crio(int root, ContainerdView &view)
{
	auto pkg = dpkg_version(root, {"cri-o"});
	if (!pkg)
		return;
	take_package(*pkg, view);  // its package is "cri-o"
	view.runtime = "cri-o";
	view.config = "/etc/crio/crio.conf";
	if (!view.cdi_library.empty()) {
		view.max_cdi_version = max_cdi_version_for_library(view.cdi_library);
	} else if (view.version) {
		view.max_cdi_version = max_cdi_version_for_crio(view.version->major, view.version->minor);
		view.max_cdi_version_from = view.max_cdi_version.empty() ? "" : "CRI-O " + view.version->text + "'s CDI library";
	}
	view.cdi_enabled = true;
	view.cdi_enabled_from = "CRI-O (CDI is always on)";
	const CrioConfig cfg = load_crio_config(root);
	view.config_files = cfg.files;
	view.warnings.insert(view.warnings.end(), cfg.warnings.begin(), cfg.warnings.end());
	view.refused = cfg.refused;
	view.refused_file = cfg.refused_file;
	view.cdi_spec_dirs = cfg.cdi_spec_dirs ? *cfg.cdi_spec_dirs : std::vector<std::string>{"/etc/cdi", "/var/run/cdi"};
	view.cdi_spec_dirs_from = cfg.cdi_spec_dirs ? cfg.cdi_spec_dirs_from : "default";
	view.cdi_section = "[crio.runtime] in a drop-in of /etc/crio/crio.conf.d/";
}

// The CRI plugin's table in a dump: 2.x's runtime plugin reads enable_cdi, 1.x's one CRI plugin (CRI_1).
constexpr const char *RUNTIME_2 = "io.containerd.cri.v1.runtime";
constexpr Millis DUMP_TIMEOUT{5000};
constexpr std::size_t MAX_DUMP_BYTES = 4u << 20;  // the default configuration dumps to 8 KiB

// "containerd: failed to load TOML: /etc/containerd/x.toml: open ...": the file containerd names.
std::string file_named(const std::string &why, const std::string &fallback)
{
	for (const char *lead : {"failed to load TOML: ", "failed to load TOML from "}) {
		const auto at = why.find(lead);
		if (at == std::string::npos || why.compare(at + std::strlen(lead), 1, "/") != 0)
			continue;
		const auto from = at + std::strlen(lead), end = why.find(':', from);
		return why.substr(from, end == std::string::npos ? std::string::npos : end - from);
	}
	return fallback;
}

// A string or a true boolean at a path of a dump's table; "" or false for anything else.
std::string string_at(const json &t, std::initializer_list<const char *> keys)
{
	const json *v = table_at(t, keys);
	return v && v->is_string() ? v->get<std::string>() : std::string();
}

bool true_at(const json &t, std::initializer_list<const char *> keys)
{
	const json *v = table_at(t, keys);
	return v && v->is_boolean() && v->get<bool>();
}

// What containerd's daemon refuses at its start and its config dump prints all the same (its main's
// checks after loading the configuration); empty when none.
std::string daemon_refuses(const json &dump, bool v2)
{
	auto text = [&](std::initializer_list<const char *> keys) { return string_at(dump, keys); };
	if (!text({"root"}).empty() && text({"root"}) == text({"state"}))
		return "root and state must be different paths (both " + printable(text({"root"})) + ")";
	std::string level = text({"debug", "level"});
	std::transform(level.begin(), level.end(), level.begin(), [](unsigned char c) { return std::tolower(c); });
	constexpr std::string_view LEVELS[] = {"", "panic", "fatal", "error", "warn", "warning", "info", "debug", "trace"};
	if (std::find(std::begin(LEVELS), std::end(LEVELS), level) == std::end(LEVELS))
		return "not a valid logrus Level: " + printable(text({"debug", "level"})) + " ([debug] level)";
	const std::string format = text({"debug", "format"});
	if (v2 && !format.empty() && format != "text" && format != "json")
		return "unknown log format: " + printable(format) + " ([debug] format)";
	return "";
}

// Why containerd's CRI plugin does not load with this table, in containerd's words; empty when it
// loads. The daemon starts all the same, without the CRI: kubelet then has no runtime. These are the
// checks of the plugin's own configuration (1.x ValidatePluginConfig, 2.x ValidateRuntimeConfig) that
// its dump's values decide; the dump prints the table before them.
std::string cri_refuses(const json &cri, bool v2)
{
	auto text = [](const json &t, const char *key) { return string_at(t, {key}); };
	auto on = [](const json &t, const char *key) { return true_at(t, {key}); };
	const json empty = json::object();
	const json *found = table_at(cri, {"containerd"});
	const json &c = found && found->is_object() ? *found : empty;
	found = table_at(c, {"runtimes"});
	std::map<std::string, const json *> runtimes;
	if (found && found->is_object())
		for (const auto &[name, r] : found->items())
			runtimes[name] = r.is_object() ? &r : &empty;
	std::string name = text(c, "default_runtime_name");
	constexpr const char *LINUX_V1 = "io.containerd.runtime.v1.linux";
	if (!v2) {  // 1.x first moves its two deprecated runtime tables into runtimes
		const json *untrusted = table_at(c, {"untrusted_workload_runtime"});
		if (untrusted && !text(*untrusted, "runtime_type").empty()) {
			if (runtimes.count("untrusted"))
				return "conflicting definitions: configuration includes both `untrusted_workload_runtime` and `runtimes[\"untrusted\"]`";
			runtimes["untrusted"] = untrusted;
		}
		if (const json *d = table_at(c, {"default_runtime"}); d && !text(*d, "runtime_type").empty())
			name = "default", runtimes["default"] = d;
	}
	if (name.empty())
		return "`default_runtime_name` is empty";
	if (!runtimes.count(name))
		return "no corresponding runtime configured in `containerd.runtimes` for `containerd` `default_runtime_name = \"" + printable(name) + "\"";
	const bool default_is_v1_linux = text(*runtimes[name], "runtime_type") == LINUX_V1;
	if (!v2 && on(cri, "systemd_cgroup") && !default_is_v1_linux)
		return std::string("`systemd_cgroup` only works for runtime ") + LINUX_V1;
	if (!v2 && on(c, "no_pivot") && !default_is_v1_linux)
		return std::string("`no_pivot` only works for runtime ") + LINUX_V1;
	for (const auto &[runtime, r] : runtimes) {
		const bool linux_v1 = text(*r, "runtime_type") == LINUX_V1;
		if (!v2 && !linux_v1 && (!text(*r, "runtime_engine").empty() || !text(*r, "runtime_root").empty()))
			return "`" + std::string(text(*r, "runtime_engine").empty() ? "runtime_root" : "runtime_engine") + "` only works for runtime " + LINUX_V1 + " (runtime " + printable(runtime) + ")";
		if (!on(*r, "privileged_without_host_devices") && on(*r, "privileged_without_host_devices_all_devices_allowed"))
			return "`privileged_without_host_devices_all_devices_allowed` requires `privileged_without_host_devices` to be enabled (runtime " + printable(runtime) + ")";
		if (const std::string io = text(*r, "io_type"); v2 && !io.empty() && io != "fifo" && io != "streaming")
			return "`io_type` can only be `streaming` or `named_pipe` (runtime " + printable(runtime) + ")";
	}
	return "";
}

// The same for its registry table (2.x: the image service's, which the CRI plugin needs): hosts.toml
// files (config_path) or the deprecated mirrors and TLS settings, never both.
std::string registry_refuses(const json *registry, bool v2)
{
	const json *config_path = registry ? table_at(*registry, {"config_path"}) : nullptr;
	if (!config_path || !config_path->is_string() || config_path->get<std::string>().empty())
		return "";
	if (const json *mirrors = table_at(*registry, {"mirrors"}); mirrors && mirrors->is_object() && !mirrors->empty())
		return "`mirrors` cannot be set when `config_path` is provided";
	const json *configs = table_at(*registry, {"configs"});
	if (!v2 && configs && configs->is_object())
		for (const auto &[host, c] : configs->items())
			if (c.is_object() && c.contains("tls"))
				return "`configs.tls` cannot be set when `config_path` is provided";
	return "";
}

// containerd's answer, read: the effective CRI table, the plugins it disables, the files it read.
void read_dump(const json &dump, bool v2, ContainerdView &view)
{
	const json *disabled = table_at(dump, {"disabled_plugins"});
	auto disables = [&](std::initializer_list<std::string_view> names) {
		if (disabled && disabled->is_array())
			for (const auto &d : *disabled)
				if (d.is_string() && std::find(names.begin(), names.end(), d.get<std::string>()) != names.end())
					return d.get<std::string>();
		return std::string();
	};
	const json *cri = table_at(dump, {"plugins", v2 ? RUNTIME_2 : CRI_1});
	// A plugin that is not loaded has no table in the dump. 1.x has one CRI plugin, which reads
	// enable_cdi; 2.x's CRI service is a plugin of its own beside it, named in the list as a URI,
	// and does not load without the image service either.
	view.cdi_table_disabled = !cri;
	if (const std::string off = disables({CRI_1, "io.containerd.cri.v1.images"}); v2 && !off.empty())
		view.cri_disabled = off;
	else if (!cri)
		view.cri_disabled = v2 ? RUNTIME_2 : disables({"cri"}).empty() ? CRI_1
									       : "cri";
	// 1.x lists the files it read, in Go's map order, which changes from run to run: sorted here.
	if (!v2)
		if (const json *imports = table_at(dump, {"imports"}); imports && imports->is_array()) {
			for (const auto &f : *imports)
				if (f.is_string())
					view.config_files.push_back(f.get<std::string>());
			std::sort(view.config_files.begin(), view.config_files.end());
		}
	if (!cri || !cri->is_object())
		return;
	if (view.cri_disabled.empty())
		view.cri_fails = cri_refuses(*cri, v2);
	if (view.cri_disabled.empty() && view.cri_fails.empty())
		view.cri_fails = registry_refuses(v2 ? table_at(dump, {"plugins", "io.containerd.cri.v1.images", "registry"}) : table_at(*cri, {"registry"}), v2);
	if (const json *e = table_at(*cri, {"enable_cdi"}); e && e->is_boolean())
		view.cdi_enabled = e->get<bool>();
	if (const json *d = table_at(*cri, {"cdi_spec_dirs"}); d && d->is_array()) {
		view.cdi_spec_dirs.clear();
		for (const auto &x : *d)
			if (x.is_string() && view.cdi_spec_dirs.size() < 64)
				view.cdi_spec_dirs.push_back(x.get<std::string>());
		view.cdi_spec_dirs_from = "containerd config dump";
	}
}

// Whether the main configuration file is there; nullopt when it is something containerd blocks on
// (a FIFO) or fails to read, which is then the refusal.
std::optional<bool> main_config(int root, ContainerdView &view)
{
	auto fd = open_confined(root, view.config, ConfinedOpen{Confinement::InRoot, O_PATH, true});
	if (!fd)
		return fd.error().errnum != ENOENT;  // containerd says what it makes of any other error
	struct stat st = {};
	if (::fstat(fd->get(), &st) == 0 && !S_ISREG(st.st_mode)) {
		view.refused = view.config + ": it is " + fs::file_type_name(st.st_mode) + ", which containerd blocks on or fails to read";
		view.refused_file = view.config;
		return std::nullopt;
	}
	return true;
}

// What 2.x's dump does not say (containerd_config.hpp): an import that is not there, a version-1
// file naming the CRI plugin twice. And the files it reads, which its dump does not list.
void follow_imports(int root, ContainerdView &view)
{
	const ContainerdImports walk = walk_containerd_imports(root, view.config);
	view.config_files = walk.files;
	std::sort(view.config_files.begin(), view.config_files.end());
	if (!walk.missing.empty()) {
		view.refused = "it imports " + walk.missing + ", which does not exist (containerd 2.x's config dump passes over it; its daemon does not)";
		view.refused_file = walk.missing;
	} else if (walk.unknown.empty() && walk.version < 0) {
		view.refused = "version = " + std::to_string(walk.version) + " in " + walk.version_file +
			       ": containerd 2.x's daemon panics migrating a configuration version below 0 (its config dump does not)";
		view.refused_file = walk.version_file;
	} else if (walk.unknown.empty() && walk.version == 1) {
		view.config_ambiguous = true;
		view.ambiguous_why = "version = 1 in " + walk.version_file +
				     " stands last after a negative version: containerd 2.x's daemon migrates its configuration from version 1, where its config dump does not, so what it runs is not what the dump says";
		view.refused_file = walk.version_file;
	} else if (!walk.ambiguous.empty()) {
		view.config_ambiguous = true;
		view.refused_file = walk.ambiguous;
	} else if (!walk.unknown.empty()) {
		view.warnings.push_back("containerd's configuration is not followed through its imports (" + walk.unknown +
					"): whether containerd 2.x starts with it is not known");
	}
}

// Asks containerd what it makes of its configuration, chrooted into the machine root so that its
// configuration and every file that imports are the machine's.
void ask_containerd(const Context &ctx, int root, ContainerdView &view)
{
	if (view.binary.empty() || !runnable(root, view.binary)) {
		view.warnings.push_back(view.binary.empty() ? std::string("containerd is installed but neither /usr/bin/containerd nor /usr/local/bin/containerd is there: its configuration is not asked")
							    : view.binary + " is not root's regular file, or others may write it: it is not run, and whether containerd uses CDI is not known");
		return;
	}
	const std::optional<bool> have_config = main_config(root, view);
	if (!have_config)
		return;
	// Without its main file containerd runs on its defaults (1.x's dump refuses the missing file).
	const std::vector<std::string> args = *have_config ? std::vector<std::string>{"--config", view.config, "config", "dump"}
							   : std::vector<std::string>{"config", "default"};
	std::string asked = view.binary;  // the command, as messages name it
	for (const auto &a : args)
		asked += " " + a;
	const ProbeResult r = run_program(Probe{view.binary, args, ctx.root, DUMP_TIMEOUT, MAX_DUMP_BYTES});
	if (r.timed_out) {
		view.refused = asked + " did not answer within " + std::to_string(DUMP_TIMEOUT.count() / 1000) +
			       " s: containerd reading its configuration does not end";
		view.refused_file = view.config;
		return;
	}
	if (!r.ran || r.too_big) {
		view.warnings.push_back("Failed to ask containerd (" + asked + "): " +
					(r.too_big ? "more than " + std::to_string(MAX_DUMP_BYTES) + " bytes" : r.error) +
					"; whether it uses CDI is not known");
		return;
	}
	if (r.status != 0) {
		std::string why = r.last_err_line();
		if (why.starts_with("containerd: "))
			why.erase(0, 12);
		view.refused = why.empty() ? asked + " exited with status " + std::to_string(r.status) : why;
		view.refused_file = file_named(why, view.config);
		return;
	}
	auto dump = parse_toml_bounded(r.out, asked, ParseLimits{32, 200000});
	if (!dump || !dump->is_object()) {
		view.warnings.push_back("containerd's answer (" + asked + ") is not read: " + (dump ? "no table" : dump.error().message) +
					"; whether it uses CDI is not known");
		return;
	}
	// The binary's own version (the dump's: 2 from 1.x, 3 from 2.x) over the package database's.
	const json *version = table_at(*dump, {"version"});
	const bool v2 = version && version->is_number_integer() ? version->get<long long>() >= 3 : view.version && view.version->major >= 2;
	if (const std::string why = daemon_refuses(*dump, v2); !why.empty()) {
		view.refused = why;
		view.refused_file = view.config;
		return;
	}
	view.cdi_enabled = v2;  // the version's default where the table does not say
	read_dump(*dump, v2, view);
	const std::string version_text = view.version ? view.version->text : std::string(v2 ? "2.x" : "1.x");
	view.cdi_enabled_from = !*have_config            ? "default of containerd " + version_text
				: view.cdi_enabled == v2 ? asked + ", as the default of containerd " + version_text
							 : asked;
	view.cdi_section = v2 ? "[plugins.'io.containerd.cri.v1.runtime'] (version = 3)"
			      : "[plugins.\"io.containerd.grpc.v1.cri\"] (with version = 2 at the top of the file)";
	if (v2 && *have_config)
		follow_imports(root, view);
}

}  // namespace

ContainerdView read_containerd(const Context &ctx, bool ask)
{
	ContainerdView view;
	view.config = ctx.config.containerd_config;
	const UniqueFd root = open_machine_root(ctx);
	if (!root)
		return view;
	find_containerd(ctx, root.get(), view);
	if (!view.found) {
		read_crio(root.get(), view);
		return view;
	}
	view.cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
	view.cdi_spec_dirs_from = "default";
	if (view.version) {
		view.max_cdi_version = max_cdi_version_for_containerd(view.version->major, view.version->minor, view.version->patch);
		// 1.6 and older have no CDI whatever they were linked with.
		if (!view.max_cdi_version.empty() && !view.cdi_library.empty())
			view.max_cdi_version = max_cdi_version_for_library(view.cdi_library);
		else if (!view.max_cdi_version.empty())
			view.max_cdi_version_from = "containerd's go.mod at " + view.version->text;
		if (view.max_cdi_version.empty())
			view.max_cdi_version_from.clear(), view.cdi_library.clear();
	} else {
		view.warnings.push_back("containerd's version is unknown (" + view.version_source +
					" is in no package database and did not say its version): which cdiVersion it accepts is not checked");
	}
	if (view.version && view.max_cdi_version.empty()) {
		view.cdi_enabled = false;
		view.cdi_enabled_from = "containerd " + view.version->text + " has no CDI support";
		return view;
	}
	if (ask) {
		ask_containerd(ctx, root.get(), view);
	} else {
		view.cdi_enabled_from = "not asked on the boot path (verify asks containerd)";
	}
	if (!view.refused.empty() || view.config_ambiguous)
		view.cdi_enabled.reset();
	return view;
}

}  // namespace unbounded
