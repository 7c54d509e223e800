#include "driver_discovery.hpp"

#include "discovery_cache.hpp"
#include "elf.hpp"
#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <cctype>
#include <elf.h>
#include <map>
#include <tuple>

namespace unbounded {
namespace {

using staging_layout::FIRMWARE_DIRS;
using staging_layout::SCAN_DIRS;
// Versioned independently of the driver: take the highest version found of each.
constexpr const char *COMPANION_PREFIXES[] = {
	"libnvidia-egl-gbm.so.", "libnvidia-egl-wayland.so.", "libnvidia-egl-wayland2.so.",
	"libnvidia-egl-xcb.so.", "libnvidia-egl-xlib.so.",
};


struct Entry {
	std::size_t tree;
	std::string rel;       // path inside the tree of the directory entry (maybe a symlink)
	std::string name;
	bool vdpau;
	std::string display;
};

}  // namespace

bool is_library_version(std::string_view v)
{
	std::size_t parts = 0;
	while (true) {
		auto dot = v.find('.');
		std::string_view part = v.substr(0, dot);
		if (!all_digits(part) || part.size() > 6)
			return false;
		parts++;
		if (dot == std::string_view::npos)
			break;
		v.remove_prefix(dot + 1);
	}
	return parts >= 2 && parts <= 3;
}

bool is_driver_version(std::string_view v)
{
	// NVIDIA driver branches have had three-digit majors for over a decade (R300 onwards); requiring
	// one keeps libfoo.so.1.2.13 of a host lib dir from ever looking like a driver file.
	return is_library_version(v) && v.find('.') >= 3;
}

std::optional<std::string> version_suffix(std::string_view name, std::string_view prefix)
{
	if (!name.starts_with(prefix))
		return std::nullopt;
	std::string_view v = name.substr(prefix.size());
	if (!is_driver_version(v))
		return std::nullopt;
	return std::string(v);
}

bool could_be_driver_file(std::string_view name)
{
	for (const char *b : HELPER_BINARIES)
		if (name == b)
			return true;
	for (const char *p : COMPANION_PREFIXES)
		if (name.starts_with(p) && is_library_version(name.substr(std::string_view(p).size())))
			return true;
	auto so = name.find(".so.");
	return name.starts_with("lib") && so != std::string_view::npos && is_driver_version(name.substr(so + 4));
}

std::optional<std::string> parse_proc_version(std::string_view text)
{
	// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
	// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.10  Release Build  (...)"
	auto line_end = text.find('\n');
	std::string_view line = text.substr(0, line_end);
	if (!line.starts_with("NVRM version:"))
		return std::nullopt;
	auto km = line.find("Kernel Module");
	if (km == std::string_view::npos)
		return std::nullopt;
	std::string_view rest = line.substr(km);
	std::size_t i = 0;
	while (i < rest.size()) {
		while (i < rest.size() && rest[i] == ' ')
			i++;
		std::size_t j = rest.find(' ', i);
		std::string_view tok = rest.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
		if (is_driver_version(tok))
			return std::string(tok);
		if (j == std::string_view::npos)
			break;
		i = j;
	}
	return std::nullopt;
}

int compare_versions(std::string_view a, std::string_view b)
{
	auto next = [](std::string_view &s) -> long {
		auto dot = s.find('.');
		std::string_view p = s.substr(0, dot);
		s = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
		long v = 0;
		for (char c : p)
			if (std::isdigit(static_cast<unsigned char>(c)))
				v = v * 10 + (c - '0');
		return v;
	};
	while (!a.empty() || !b.empty()) {
		long x = next(a), y = next(b);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

Result<DriverSet> discover_driver(const DiscoveryInput &in)
{
	const Staging &st = *in.staging;
	DriverSet out;

	std::string where;
	for (const auto &t : st.trees())
		where += (where.empty() ? "" : ", ") + t.display;
	if (st.trees().empty())
		return fail(make_error("No staging mounts found"));

	// 1. The scanned directories. A host lib dir holds thousands of names; they are listed unsorted
	// and only the few that can matter are kept (and sorted) below.
	struct Listing {
		std::size_t tree;
		const char *dir;
		std::vector<std::string> names;
	};
	std::vector<Listing> listings;
	for (std::size_t t = 0; t < st.trees().size(); t++) {
		for (const char *dir : SCAN_DIRS) {
			auto dfd = st.open_dir(t, dir);
			if (!dfd)
				return fail(dfd.error());
			if (!*dfd)
				continue;
			const std::string display = fs::join(st.trees()[t].display, dir);
			struct stat dst{};
			if (::fstat(dfd->get(), &dst) < 0)
				return fail(last_errno_error("Failed to stat " + display));
			const std::string key = identity_key(dst);
			std::vector<std::string> names;
			if (const auto *cached = in.cache ? in.cache->listing(key) : nullptr) {
				names = *cached;
			} else {
				auto listed = fs::list_dir(dfd->get(), display, /*sorted=*/false, could_be_driver_file);
				if (!listed)
					return fail(listed.error());
				names = std::move(*listed);
				// A listing with a name that is not plain (skipped with a warning below) is not
				// memoised: the memo is JSON, and every run should say the same about it.
				if (in.cache && std::all_of(names.begin(), names.end(), [](const std::string &n) { return is_plain_file_name(n); }))
					in.cache->put_listing(key, names);
			}
			if (!names.empty())
				listings.push_back(Listing{t, dir, std::move(names)});
		}
	}
	auto display_of = [&](std::size_t tree, const char *dir, const std::string &name) {
		return fs::join(st.trees()[tree].display, fs::join(dir, name));
	};

	// 2. The version: libcuda.so.<v>, agreeing with libnvidia-ml.so.<v>.
	std::map<std::string, std::string> cuda_versions, nvml_versions;  // version -> first path seen
	for (const auto &l : listings) {
		for (const auto &n : l.names) {
			if (!n.starts_with("lib"))
				continue;
			auto keep_first = [&](std::map<std::string, std::string> &m, const std::string &v) {
				std::string d = display_of(l.tree, l.dir, n);
				auto [it, fresh] = m.emplace(v, d);
				if (!fresh && d < it->second)
					it->second = d;
			};
			if (auto v = version_suffix(n, "libcuda.so."))
				keep_first(cuda_versions, *v);
			if (auto v = version_suffix(n, "libnvidia-ml.so."))
				keep_first(nvml_versions, *v);
		}
	}

	if (cuda_versions.empty())
		return fail(make_error("No libcuda.so.<version> found in the staging mounts (" + where + ")", EXIT_NOT_READY, ENOENT));
	std::string version;
	if (cuda_versions.size() == 1) {
		version = cuda_versions.begin()->first;
	} else if (in.kernel_version && cuda_versions.count(*in.kernel_version)) {
		version = *in.kernel_version;
	} else {
		std::string list;
		for (const auto &[v, p] : cuda_versions)
			list += (list.empty() ? "" : ", ") + p;
		return fail(make_error("Found several driver versions in the staging mounts and no kernel module version to choose: " + list));
	}
	if (!nvml_versions.count(version)) {
		if (nvml_versions.empty())
			return fail(make_error("No libnvidia-ml.so." + version + " found in the staging mounts (" + where +
					       "), libcuda is " + cuda_versions[version], EXIT_NOT_READY, ENOENT));
		return fail(make_error("Driver version mismatch: " + cuda_versions[version] + " but " +
				       nvml_versions.begin()->second));
	}
	out.libcuda_display = cuda_versions[version];
	out.version = version;

	// The entries that can matter for this version, in a stable order (tree, scan dir, name).
	const std::string lib_suffix = ".so." + version;
	std::vector<Entry> entries;
	for (const auto &l : listings) {
		const bool vdpau = std::string_view(l.dir).ends_with("vdpau");
		for (const auto &n : l.names) {
			bool keep = (n.starts_with("lib") && n.ends_with(lib_suffix)) ||
				    std::any_of(std::begin(COMPANION_PREFIXES), std::end(COMPANION_PREFIXES),
						[&](const char *p) { return n.starts_with(p); }) ||
				    std::any_of(std::begin(HELPER_BINARIES), std::end(HELPER_BINARIES),
						[&](const char *b) { return n == b; });
			if (keep && !is_plain_file_name(n)) {
				out.warnings.push_back("Skipping " + printable(display_of(l.tree, l.dir, n)) +
						       ", its name has characters no driver file has");
				continue;
			}
			if (keep)
				entries.push_back(Entry{l.tree, fs::join(l.dir, n), n, vdpau, display_of(l.tree, l.dir, n)});
		}
	}
	auto scan_index = [](const std::string &rel) {
		const std::string dir = fs::dirname(rel) == "." ? "" : fs::dirname(rel);
		for (std::size_t i = 0; i < std::size(SCAN_DIRS); i++)
			if (dir == SCAN_DIRS[i])
				return i;
		return std::size(SCAN_DIRS);
	};
	std::sort(entries.begin(), entries.end(), [&](const Entry &a, const Entry &b) {
		return std::tuple(a.tree, scan_index(a.rel), a.name) < std::tuple(b.tree, scan_index(b.rel), b.name);
	});

	// 3. The files.
	std::map<std::string, DriverFile> by_dest;
	auto add = [&](DriverFile f) -> Result<void> {
		auto it = by_dest.find(f.dest);
		if (it != by_dest.end()) {
			const auto &a = it->second.source.st, &b = f.source.st;
			if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
				out.warnings.push_back("Ignoring " + f.source.display + ", " + f.dest + " is already taken from " +
						       it->second.source.display);
			return {};
		}
		by_dest.emplace(f.dest, std::move(f));
		return {};
	};
	auto resolve_regular = [&](const Entry &e) -> Result<ResolvedFile> {
		auto r = st.resolve(e.tree, e.rel);
		if (!r)
			return fail(r.error());
		if (!S_ISREG(r->st.st_mode))
			return fail(errno_error(EINVAL, "Refusing " + e.display + (e.display == r->display ? "" : " (-> " + r->display + ")") +
							      ", not a regular file"));
		return r;
	};

	auto elf_info = [&](const ResolvedFile &src) -> Result<elf::Info> {
		const std::string key = identity_key(src.st);
		if (in.cache)
			if (auto hit = in.cache->elf(key))
				return *hit;
		auto fd = st.open_regular(src);
		if (!fd)
			return fail(fd.error());
		auto info = elf::read_info(fd->get(), src.display);
		if (info && in.cache)
			in.cache->put_elf(key, *info);
		return info;
	};

	std::map<std::string, std::pair<std::string, const Entry *>> companions;  // prefix -> (version, entry)
	for (const auto &e : entries) {
		// lib<name>.so.<v>, with no earlier ".so." (libfoo.so.1.so.<v> is not a driver library)
		const bool driver_lib = e.name.starts_with("lib") && e.name.ends_with(lib_suffix) &&
					e.name.find(".so.") == e.name.size() - lib_suffix.size();
		if (!driver_lib) {
			for (const char *p : COMPANION_PREFIXES) {
				if (!e.name.starts_with(p))
					continue;
				std::string v = e.name.substr(std::string_view(p).size());
				if (!is_library_version(v))
					continue;
				auto &slot = companions[p];
				if (slot.first.empty() || compare_versions(v, slot.first) > 0)
					slot = {v, &e};
			}
			continue;
		}
		auto src = resolve_regular(e);
		if (!src)
			return fail(src.error());
		auto info = elf_info(*src);
		if (!info)
			return fail(info.error());
		std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
		if (arch.empty())
			return fail(make_error("Unsupported ELF machine " + std::to_string(info->machine) + " in " + src->display));
		DriverFile f{FileKind::Library, "lib/" + arch + (e.vdpau ? "/vdpau/" : "/") + e.name, std::move(*src), info->soname};
		if (auto r = add(std::move(f)); !r)
			return fail(r.error());
	}
	for (const auto &[prefix, ve] : companions) {
		const Entry &e = *ve.second;
		auto src = resolve_regular(e);
		if (!src) {
			out.warnings.push_back(src.error().message + ", skipping this optional library");
			continue;
		}
		auto info = elf_info(*src);
		if (!info)
			return fail(info.error());
		std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
		if (arch.empty())
			continue;
		DriverFile f{FileKind::Library, "lib/" + arch + "/" + e.name, std::move(*src), info->soname};
		if (auto r = add(std::move(f)); !r)
			return fail(r.error());
	}

	for (const auto &e : entries) {
		if (std::find_if(std::begin(HELPER_BINARIES), std::end(HELPER_BINARIES),
				 [&](const char *b) { return e.name == b; }) == std::end(HELPER_BINARIES))
			continue;
		auto src = resolve_regular(e);
		if (!src) {
			// Helpers are useful, not essential (nvidia-ctk treats them the same): say so and go on.
			out.warnings.push_back(src.error().message + ", skipping this helper binary");
			continue;
		}
		if (!(src->st.st_mode & 0111)) {
			out.warnings.push_back("Skipping " + src->display + ", not executable");
			continue;
		}
		if (auto r = add(DriverFile{FileKind::Binary, "bin/" + e.name, std::move(*src), std::nullopt}); !r)
			return fail(r.error());
	}

	for (std::size_t t = 0; t < st.trees().size(); t++) {
		for (const char *base : FIRMWARE_DIRS) {
			std::string dir = fs::join(base, version);
			auto names = st.list(t, dir);
			if (!names)
				return fail(names.error());
			for (const auto &n : *names) {
				if (!n.ends_with(".bin"))
					continue;
				if (!is_plain_file_name(n)) {
					out.warnings.push_back("Skipping firmware " + printable(fs::join(st.trees()[t].display, fs::join(dir, n))) +
							       ", its name has characters no driver file has");
					continue;
				}
				Entry e{t, fs::join(dir, n), n, false, fs::join(st.trees()[t].display, fs::join(dir, n))};
				auto src = resolve_regular(e);
				if (!src)
					return fail(src.error());
				if (auto r = add(DriverFile{FileKind::Firmware, "lib/firmware/nvidia/" + version + "/" + n,
							    std::move(*src), std::nullopt});
				    !r)
					return fail(r.error());
			}
		}
	}

	// Containers of this machine load libcuda and libnvidia-ml of its own architecture; a 32-bit or
	// foreign-architecture copy satisfying the version check would give a root that cannot work.
	// Checked here, on the plan, so such staging never replaces a working root.
	const std::string native = elf::native_multiarch();
	for (const char *lib : {"libcuda.so.", "libnvidia-ml.so."}) {
		const std::string name = lib + version;
		if (by_dest.count("lib/" + native + "/" + name))
			continue;
		std::string found;
		for (const auto &[dest, f] : by_dest)
			if (fs::basename(dest) == name)
				found += (found.empty() ? "" : ", ") + f.source.display + " (" + fs::basename(fs::dirname(dest)) + ")";
		return fail(make_error("No " + native + " " + name + " in the staging mounts" +
				       (found.empty() ? std::string() : ", only " + found) + ": this machine needs its own architecture's driver"));
	}
	out.multiarch = native;
	for (auto &[dest, f] : by_dest)
		out.files.push_back(std::move(f));
	return out;
}

}  // namespace unbounded
