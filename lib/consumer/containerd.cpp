#include "containerd.hpp"

#include "bounded_parse.hpp"
#include "confined_open.hpp"
#include "fs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fcntl.h>
#include <fnmatch.h>
#include <iterator>
#include <set>
#include <unistd.h>

namespace unbounded {
namespace {

using json = nlohmann::json;

constexpr const char *DPKG_STATUS = "/var/lib/dpkg/status";
constexpr std::size_t MAX_CONFIG_BYTES = 1u << 20;  // containerd's own default config is 10 KiB
constexpr std::size_t MAX_CONFIG_FILES = 32;        // the main file and what it imports, transitively

UniqueFd open_root(const Context &ctx)
{
	return UniqueFd(::open(ctx.root.empty() ? "/" : ctx.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

// A root-owned file of the machine, resolved inside its root (a configuration may well be a symlink),
// opened without blocking and read only when it is a regular file of bounded size.
Result<std::string> read_machine_file(int root_fd, const std::string &path, std::size_t cap)
{
	auto fd = open_confined(root_fd, path, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_NONBLOCK | O_NOCTTY, true});
	if (!fd)
		return fail(errno_error(fd.error().errnum, "Failed to open " + path));
	if (auto r = fs::require_regular(fd->get(), path); !r)
		return fail(r.error());
	return fs::read_fd(fd->get(), path, cap);
}

// The installed containerd package's version from dpkg's database, read in blocks (the file may be
// megabytes; only the package's own paragraph is kept).
struct PackageVersion {
	std::string package, version;
	std::optional<CdiLibrary> cdi_library;  // when Debian's field names it
	std::string cdi_library_field;          // "Built-Using" or "Static-Built-Using"
};
std::optional<PackageVersion> dpkg_version(int root_fd)
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
			if ((package == "containerd" || package == "containerd.io") && installed && !version.empty())
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

// The CRI plugin table that holds enable_cdi and cdi_spec_dirs, by the file's `version`, as the
// containerd that reads it names it: 2.x migrates version-2 files' "io.containerd.grpc.v1.cri" keys to
// "io.containerd.cri.v1.runtime".
const json *cri_table(const json &doc, long file_version)
{
	if (!doc.contains("plugins") || !doc["plugins"].is_object())
		return nullptr;
	const json &plugins = doc["plugins"];
	const char *name = file_version >= 3   ? "io.containerd.cri.v1.runtime"
			   : file_version == 2 ? "io.containerd.grpc.v1.cri"
					       : "cri";
	auto it = plugins.find(name);
	return it != plugins.end() && it->is_object() ? &*it : nullptr;
}

std::string cri_section_name(long file_version)
{
	return file_version >= 3   ? "[plugins.'io.containerd.cri.v1.runtime']"
	       : file_version == 2 ? "[plugins.\"io.containerd.grpc.v1.cri\"]"
				   : "[plugins.cri]";
}

// containerd's imports: paths relative to the importing file's directory, a '*' pattern in the last
// component globbed (filepath.Glob), sorted.
std::vector<std::string> resolve_imports(int root_fd, const std::string &file, const json &doc, std::vector<std::string> &warnings)
{
	std::vector<std::string> out;
	if (!doc.contains("imports"))
		return out;
	if (!doc["imports"].is_array()) {
		warnings.push_back(file + ": imports is not an array of paths, not following it");
		return out;
	}
	for (const auto &v : doc["imports"]) {
		if (!v.is_string())
			continue;
		std::string p = v.get<std::string>();
		if (p.empty())
			continue;
		if (p[0] != '/')
			p = fs::join(fs::dirname(file), p);
		const std::string base = fs::basename(p);
		if (base.find_first_of("*?[") == std::string::npos) {
			out.push_back(p);
			continue;
		}
		const std::string dir = fs::dirname(p);
		auto dfd = open_confined(root_fd, dir, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, true});
		if (!dfd)
			continue;  // a pattern that matches nothing is no error to containerd
		auto names = fs::list_dir(dfd->get(), dir);
		if (!names)
			continue;
		for (const auto &n : *names)
			if (::fnmatch(base.c_str(), n.c_str(), FNM_PERIOD) == 0)
				out.push_back(fs::join(dir, n));
	}
	return out;
}

long file_version_of(const json &doc)
{
	return doc.contains("version") && doc["version"].is_number_integer() ? doc["version"].get<long>() : 1;
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

std::string max_cdi_version_for(const ContainerdVersion &v)
{
	// The CDI library each release vendors (containerd's go.mod at each tag).
	if (v.major < 1 || (v.major == 1 && v.minor < 7))
		return "";
	if (v.major == 1) {
		if (v.minor > 7 || v.patch >= 27)
			return "0.8.0";
		if (v.patch >= 16)
			return "0.7.0";
		if (v.patch >= 12)
			return "0.6.0";
		return "0.5.0";
	}
	if (v.major == 2 && v.minor == 0)
		return v.patch >= 5 ? "1.0.0" : "0.8.0";
	if (v.major == 2 && (v.minor == 1 || (v.minor == 2 && v.patch == 0)))
		return "1.0.0";
	return "1.1.0";
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

std::string max_cdi_version_for_library(std::string_view library_version)
{
	if (library_version.starts_with("v"))
		library_version.remove_prefix(1);
	if (const std::size_t colon = library_version.find(':'); colon != std::string_view::npos)
		library_version.remove_prefix(colon + 1);  // the epoch
	if (const std::size_t really = library_version.find("+really"); really != std::string_view::npos)
		library_version.remove_prefix(really + 7);  // Debian's spelling of a downgrade: the real version
	int major = -1, minor = -1;
	const char *p = library_version.data(), *end = p + library_version.size();
	auto r = std::from_chars(p, end, major);
	if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.')
		return "";
	r = std::from_chars(r.ptr + 1, end, minor);
	if (r.ec != std::errc() || major < 0 || minor < 0 || (major == 0 && minor < 5) || major > 99 || minor > 99)
		return "";
	return std::to_string(major) + "." + std::to_string(minor) + ".0";
}

int compare_cdi_versions(std::string_view a, std::string_view b)
{
	auto parse = [](std::string_view s) {
		std::array<int, 3> n{0, 0, 0};
		const char *p = s.data(), *end = s.data() + s.size();
		for (int &x : n) {
			auto r = std::from_chars(p, end, x);
			p = r.ptr;
			if (p != end && *p == '.')
				p++;
		}
		return n;
	};
	const auto x = parse(a), y = parse(b);
	return x < y   ? -1
	       : x > y ? 1
		       : 0;
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

// Whether containerd is installed, and its version when dpkg knows it.
// With the CDI library Debian built it against, when the package names it: that library, not the
// one upstream's go.mod names for the version, decides which cdiVersion containerd accepts (trixie's
// 1.7.24 is built with 0.8.0 where upstream's vendors 0.7.0).
void find_containerd(int root, ContainerdView &view)
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
				break;
			}
		}
	}
}

// containerd's configuration files in its merge order, parsed; those that cannot be read or parsed
// are warnings and set `unreadable` (what they say about CDI is not known).
std::vector<std::pair<std::string, json>> read_config_files(int root, ContainerdView &view, bool &unreadable)
{
	std::vector<std::pair<std::string, json>> docs;
	std::vector<std::string> pending{view.config};
	std::set<std::string> seen;
	while (!pending.empty()) {
		const std::string file = pending.front();
		pending.erase(pending.begin());
		if (!seen.insert(file).second)
			continue;
		if (seen.size() > MAX_CONFIG_FILES) {
			view.warnings.push_back("containerd's configuration imports more than " + std::to_string(MAX_CONFIG_FILES) +
						" files: " + file + " and the rest not read, whether it uses CDI is not known");
			unreadable = true;
			break;
		}
		auto text = read_machine_file(root, file, MAX_CONFIG_BYTES);
		if (!text) {
			if (text.error().errnum == ENOENT && file == view.config)
				break;  // no configuration: containerd runs on its defaults
			view.warnings.push_back("containerd's configuration " + text.error().message + ": whether it uses CDI is not known");
			unreadable = true;
			continue;
		}
		auto doc = parse_toml_bounded(*text, file, ParseLimits{32, 100000});
		if (!doc) {
			view.warnings.push_back("containerd's configuration " + doc.error().message + ": whether it uses CDI is not known");
			unreadable = true;
			continue;
		}
		for (auto &imp : resolve_imports(root, file, *doc, view.warnings))
			pending.push_back(std::move(imp));
		view.config_files.push_back(file);
		docs.emplace_back(file, std::move(*doc));
	}
	return docs;
}

// What containerd does without a CRI table that says otherwise.
void cdi_defaults(ContainerdView &view, bool v2)
{
	view.cdi_enabled = v2;
	view.cdi_enabled_from = view.version ? "default of containerd " + view.version->text : "";
	if (!view.version)
		view.cdi_enabled.reset();
	view.cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
	view.cdi_spec_dirs_from = "default";
}

// enable_cdi and cdi_spec_dirs from the files' CRI tables, merged as the version does (see the
// caller); returns, for 1.x, the last file whose CRI table stands.
std::string apply_cri_tables(const std::vector<std::pair<std::string, json>> &docs, bool v2, long effective, ContainerdView &view)
{
	std::string table_from;
	for (const auto &[file, doc] : docs) {
		const long fv = v2 ? file_version_of(doc) : effective;
		const json *cri = cri_table(doc, v2 ? std::max(fv, 2L) : fv);
		if (!cri)
			continue;
		if (!v2) {
			cdi_defaults(view, v2);
			table_from = file;
			if (view.version)
				view.cdi_enabled_from = "default of containerd " + view.version->text + ", as " + file + " sets " + cri_section_name(fv) +
							" without enable_cdi";
		}
		if (cri->contains("enable_cdi") && (*cri)["enable_cdi"].is_boolean()) {
			view.cdi_enabled = (*cri)["enable_cdi"].get<bool>();
			view.cdi_enabled_from = file;
		}
		if (cri->contains("cdi_spec_dirs") && (*cri)["cdi_spec_dirs"].is_array()) {
			view.cdi_spec_dirs.clear();
			for (const auto &d : (*cri)["cdi_spec_dirs"])
				if (d.is_string() && !d.get<std::string>().empty() && view.cdi_spec_dirs.size() < 64)
					view.cdi_spec_dirs.push_back(d.get<std::string>());
			view.cdi_spec_dirs_from = file;
		}
	}
	return table_from;
}

}  // namespace

ContainerdView read_containerd(const Context &ctx)
{
	ContainerdView view;
	view.config = ctx.config.containerd_config;
	const UniqueFd root = open_root(ctx);
	if (!root)
		return view;
	find_containerd(root.get(), view);
	if (!view.found)
		return view;
	const bool v2 = view.version && view.version->major >= 2;
	if (view.version) {
		view.max_cdi_version = max_cdi_version_for(*view.version);
		// 1.6 and older have no CDI whatever they were linked with.
		if (!view.max_cdi_version.empty() && !view.cdi_library.empty())
			view.max_cdi_version = max_cdi_version_for_library(view.cdi_library);
		else if (!view.max_cdi_version.empty())
			view.max_cdi_version_from = "containerd's go.mod at " + view.version->text;
		if (view.max_cdi_version.empty())
			view.max_cdi_version_from.clear(), view.cdi_library.clear();
	} else {
		view.warnings.push_back("containerd's version is unknown (" + view.version_source +
					" is not in dpkg's database): which cdiVersion it accepts is not checked");
	}
	if (view.version && view.max_cdi_version.empty()) {
		view.cdi_enabled = false;
		view.cdi_enabled_from = "containerd " + view.version->text + " has no CDI support";
		return view;
	}
	// The files in containerd's merge order: the main one, then its imports, breadth first.
	bool unreadable = false;
	const auto docs = read_config_files(root.get(), view, unreadable);
	// 1.x merges the files' `version` (the last one set wins) and reads every file's plugins by that
	// one version; a file's plugin table replaces the whole table of an earlier one (mergeConfig), so
	// a drop-in that sets another CRI key drops enable_cdi = true set in config.toml. 2.x migrates
	// each file from its own version and merges plugin tables key by key.
	long effective = 1;
	for (const auto &[file, doc] : docs)
		if (doc.contains("version") && doc["version"].is_number_integer() && doc["version"].get<long>() != 0)
			effective = doc["version"].get<long>();
	cdi_defaults(view, v2);
	const std::string table_from = apply_cri_tables(docs, v2, effective, view);  // 1.x: the last file whose CRI table stands
	view.cdi_table_from = table_from;
	if (v2)
		view.cdi_section = "[plugins.'io.containerd.cri.v1.runtime'] (version = 3)";
	else if (effective == 1 && table_from.empty())
		view.cdi_section = "[plugins.\"io.containerd.grpc.v1.cri\"] (with version = 2 at the top of the file)";
	else
		view.cdi_section = cri_section_name(effective);
	if (unreadable && !view.cdi_enabled_from.starts_with("/"))
		view.cdi_enabled.reset();
	return view;
}

}  // namespace unbounded
