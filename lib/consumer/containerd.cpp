#include "containerd.hpp"

#include "bounded_parse.hpp"
#include "cdi_model.hpp"
#include "confined_open.hpp"
#include "fs.hpp"
#include "containerd_config.hpp"
#include "crio_config.hpp"
#include "format.hpp"
#include "run_probe.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fcntl.h>
#include <fnmatch.h>
#include <iterator>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {
namespace {

using json = nlohmann::json;

constexpr const char *DPKG_STATUS = "/var/lib/dpkg/status";

UniqueFd open_root(const Context &ctx)
{
	return UniqueFd(::open(ctx.root.empty() ? "/" : ctx.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

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

std::string section_name(const std::string &table)
{
	return table == "cri" ? "[plugins.cri]" : table == "io.containerd.cri.v1.runtime" ? "[plugins.'io.containerd.cri.v1.runtime']"
											  : "[plugins.\"" + table + "\"]";
}

// containerd's version as the binary says it (`containerd --version`: "containerd
// github.com/containerd/containerd v1.7.24 88bf19b...", 2.x's ".../containerd/v2 v2.1.9 ...",
// Docker's "containerd containerd.io 1.7.27 ..."), for a containerd no package database knows (a
// release tarball, an RPM). Only a binary that is root's and writable by nobody else is run.
std::optional<std::pair<ContainerdVersion, std::string>> binary_version(const Context &ctx, int root, const char *bin)
{
	struct stat st = {};
	if (::fstatat(root, bin + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    !(st.st_mode & S_IXUSR))
		return std::nullopt;
	const auto out = run_probe(ctx.real(bin), "--version", Millis(2000), 4096);
	if (!out)
		return std::nullopt;
	std::string_view text = *out;
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

// Whether containerd is installed, and its version when dpkg knows it, else as its binary says.
// With the CDI library Debian built it against, when the package names it: that library, not the
// one upstream's go.mod names for the version, decides which cdiVersion containerd accepts (trixie's
// 1.7.24 is built with 0.8.0 where upstream's vendors 0.7.0).
void find_containerd(const Context &ctx, int root, ContainerdView &view)
{
	if (auto pkg = dpkg_version(root)) {
		view.found = true;
		view.version = parse_containerd_version(pkg->version);
		view.version_source = std::string(DPKG_STATUS) + " (" + pkg->package + " " + printable(pkg->version) + ")";
		if (pkg->cdi_library && !max_cdi_version_for_library(pkg->cdi_library->version).empty()) {
			view.cdi_library = pkg->cdi_library->version;
			view.max_cdi_version_from = pkg->cdi_library_field + " of " + pkg->package + " in " + DPKG_STATUS + ": " +
						    pkg->cdi_library->package + " " + view.cdi_library;
		}
	} else {
		for (const char *bin : {"/usr/bin/containerd", "/usr/local/bin/containerd"}) {
			struct stat st = {};
			if (::fstatat(root, bin + 1, &st, AT_SYMLINK_NOFOLLOW) == 0) {
				view.found = true;
				view.version_source = bin;
				if (auto v = binary_version(ctx, root, bin)) {
					view.version = v->first;
					view.version_source = std::string(bin) + " --version (" + printable(v->second) + ")";
				}
				break;
			}
		}
	}
}

// CRI-O as the runtime (no containerd): CDI always on, its spec directories from its own files.
void read_crio(int root, ContainerdView &view)
{
	auto pkg = dpkg_version(root, {"cri-o"});
	if (!pkg)
		return;
	view.found = true;
	view.runtime = "cri-o";
	view.config = "/etc/crio/crio.conf";
	view.version = parse_containerd_version(pkg->version);
	view.version_source = std::string(DPKG_STATUS) + " (cri-o " + printable(pkg->version) + ")";
	if (pkg->cdi_library && !max_cdi_version_for_library(pkg->cdi_library->version).empty()) {
		view.cdi_library = pkg->cdi_library->version;
		view.max_cdi_version = max_cdi_version_for_library(view.cdi_library);
		view.max_cdi_version_from = pkg->cdi_library_field + " of cri-o in " + std::string(DPKG_STATUS) + ": " + pkg->cdi_library->package + " " +
					    view.cdi_library;
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

}  // namespace

ContainerdView read_containerd(const Context &ctx)
{
	ContainerdView view;
	view.config = ctx.config.containerd_config;
	const UniqueFd root = open_root(ctx);
	if (!root)
		return view;
	find_containerd(ctx, root.get(), view);
	if (!view.found) {
		read_crio(root.get(), view);
		return view;
	}
	const bool v2 = view.version && view.version->major >= 2;
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
	// The files as containerd loads and merges them (containerd_config.hpp).
	const LoadedConfig cfg = load_containerd_config(root.get(), view.config, v2 ? 2 : 1);
	view.config_files = cfg.files;
	view.warnings.insert(view.warnings.end(), cfg.warnings.begin(), cfg.warnings.end());
	view.refused = cfg.refused;
	view.refused_file = cfg.refused_file.empty() ? view.config : cfg.refused_file;
	view.cri_disabled = cfg.cri_disabled;
	view.cdi_table_disabled = cfg.cdi_table_disabled;
	view.cdi_table_from = cfg.cri_table_from;
	view.cdi_enabled = v2;
	view.cdi_enabled_from = view.version ? "default of containerd " + view.version->text : "";
	if (!cfg.cri_table_from.empty() && !v2 && view.version)
		view.cdi_enabled_from += ", as " + cfg.cri_table_from + " sets " + section_name(cfg.cri_table) + " without enable_cdi";
	if (cfg.enable_cdi) {
		view.cdi_enabled = *cfg.enable_cdi;
		view.cdi_enabled_from = cfg.enable_cdi_from;
	}
	if (!view.version && !cfg.enable_cdi)
		view.cdi_enabled.reset();
	view.cdi_spec_dirs = cfg.cdi_spec_dirs ? *cfg.cdi_spec_dirs : std::vector<std::string>{"/etc/cdi", "/var/run/cdi"};
	view.cdi_spec_dirs_from = cfg.cdi_spec_dirs ? cfg.cdi_spec_dirs_from : "default";
	if (v2)
		view.cdi_section = "[plugins.'io.containerd.cri.v1.runtime'] (version = 3)";
	else if (cfg.version < 2 && cfg.cri_table_from.empty())
		view.cdi_section = "[plugins.\"io.containerd.grpc.v1.cri\"] (with version = 2 at the top of the file)";
	else
		view.cdi_section = section_name(cfg.cri_table);
	if (cfg.unknown && !view.cdi_enabled_from.starts_with("/"))
		view.cdi_enabled.reset();
	if (!view.refused.empty() || cfg.ambiguous)
		view.cdi_enabled.reset();
	view.config_ambiguous = cfg.ambiguous;
	return view;
}

}  // namespace unbounded
