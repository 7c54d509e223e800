// Discovery: one driver's files found in the staging trees, step by step (discover_driver: the
// listings and version, the entries of this version resolved to files, the libraries and binaries,
// what the root takes beside them, the GSP firmware).
#include "bounded_parse.hpp"
#include "discovery_cache.hpp"
#include "driver_discovery.hpp"
#include "elf.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "graphics_config.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <tuple>
#include <vector>

namespace unbounded {
namespace {

// ---- The names discovery looks for beside the versioned libraries: the companions, the unversioned
// libraries, the DLSS DLLs, OptiX's data file, and the libraries loaded by name at run time.

// Versioned independently of the driver: take the highest version found of each.
inline constexpr const char *COMPANION_PREFIXES[] = {
	"libnvidia-egl-gbm.so.",
	"libnvidia-egl-wayland.so.",
	"libnvidia-egl-wayland2.so.",
	"libnvidia-egl-xcb.so.",
	"libnvidia-egl-xlib.so.",
};
// Libraries of the driver whose file name is their SONAME, without the driver's version, so that no
// *.so.<version> pattern finds them (nvidia-ctk names them explicitly too). libnvidia-api.so.1 is
// NVAPI for Linux: DXVK-NVAPI (and so Proton) loads it for DLSS, Reflex and the GPU's own queries.
inline constexpr const char *UNVERSIONED_LIBRARIES[] = {"libnvidia-api.so.1"};
// DLSS for Windows games: PE files, not ELF, that Proton copies into a game's prefix. Proton looks
// for them in nvidia/wine/ under the directory libGLX_nvidia.so.0 was loaded from, so they go to
// lib/<multiarch>/nvidia/wine/ in the root and in the container, next to the libraries.
inline constexpr const char *WINE_DIR = "nvidia/wine";
inline constexpr const char *WINE_DLLS[] = {"nvngx.dll", "_nvngx.dll"};
inline constexpr std::uint64_t MAX_WINE_DLL_BYTES = 256u << 20;

// OptiX's data file, which libnvoptix.so.<v> reads (from /usr/share/nvidia in a container, where
// nvidia-ctk mounts it). Debian's libnvoptix1 ships it beside the library (nvidia/current/), Ubuntu
// and the .run installer in /usr/share/nvidia. 134 MB in Debian's 535: it is copied only when the
// root has the library that reads it, and `nvoptix: false` leaves it out (see DiscoveryInput).
inline constexpr const char *OPTIX_DATA = "nvoptix.bin";
inline constexpr const char *OPTIX_DATA_DEST = "usr/share/nvidia/nvoptix.bin";
// Where a tree holds it when it is not beside the library: the tree is the host's /usr/share/nvidia,
// /usr/share or /usr.
inline constexpr const char *OPTIX_DATA_IN_SHARE[] = {"nvoptix.bin", "nvidia/nvoptix.bin", "share/nvidia/nvoptix.bin"};
inline constexpr std::uint64_t MAX_OPTIX_DATA_BYTES = 1ull << 30;

inline bool is_unversioned_library(std::string_view name)
{
	return std::any_of(std::begin(UNVERSIONED_LIBRARIES), std::end(UNVERSIONED_LIBRARIES), [&](const char *l) { return name == l; });
}

// Libraries NVIDIA's libraries load by name at run time (dlopen), not through DT_NEEDED, without
// which they fail: libEGL_nvidia opens libnvidia-eglcore.so.<its version> (the string is in the
// library; EGL then finds no NVIDIA device). Checked like DT_NEEDED by the closure check.
struct RuntimeLoad {
	const char *library_prefix;  // "libEGL_nvidia.so." + version
	const char *loads_prefix;    // "libnvidia-eglcore.so." + version
};
inline constexpr RuntimeLoad RUNTIME_LOADS[] = {
	{"libEGL_nvidia.so.", "libnvidia-eglcore.so."},
};

inline bool is_helper(std::string_view name)
{
	return std::any_of(std::begin(HELPER_BINARIES), std::end(HELPER_BINARIES), [&](const char *b) { return name == b; });
}

inline bool is_companion(std::string_view name)
{
	return std::any_of(std::begin(COMPANION_PREFIXES), std::end(COMPANION_PREFIXES), [&](const char *p) { return name.starts_with(p); });
}

struct Entry {
	std::size_t tree;
	std::string rel;  // path inside the tree of the directory entry (maybe a symlink)
	std::string name;
	bool vdpau;
	std::string display;
	std::size_t scan_index = 0;  // of its directory in the tree's scan_dirs(): earlier is preferred
};

class Discovery {
public:
	explicit Discovery(const DiscoveryInput &in) : in_(in), st_(*in.staging) {}

	Result<DriverSet> run();

private:
	struct Listing {
		std::size_t tree;
		std::string dir;
		std::size_t scan_index;
		std::vector<std::string> names;
	};
	struct OtherDriver {
		std::size_t tree;
		std::string dir;      // "" for the whole tree
		std::string version;  // of its libcuda
	};

	// Steps 1 to 3
	std::string display_of(std::size_t tree, const std::string &dir, const std::string &name) const;
	std::string where() const;
	std::string cap_message(std::size_t tree, std::size_t kept, const std::vector<std::string> &ignored) const;
	Result<void> list_scan_dirs();
	Result<void> choose_version();
	void find_other_drivers();
	std::string other_driver_of(std::size_t tree, const std::string &rel, const std::vector<std::string> &via = {}) const;
	Result<void> select_entries();

	// From an entry to a file of the root
	void add(DriverFile f);
	Result<ResolvedFile> resolve_regular(const Entry &e) const;
	Result<elf::Info> elf_info(const ResolvedFile &src) const;
	std::optional<ResolvedFile> resolve_optional(std::size_t tree, const std::string &rel, std::string_view what);
	bool note_taken_elsewhere(const Entry &e, const std::string &why);
	bool is_link(std::size_t tree, const std::string &dir, const char *name) const;
	bool in_libdir(std::string_view name) const;

	// Steps 4, 5, 7 and 8
	Result<void> add_libraries();
	Result<void> add_unversioned_libraries();
	Result<void> add_optional_library(const Entry &e, bool broken_elf_fatal);
	Result<void> add_helpers();
	Result<void> check_native();
	Result<void> check_closure();

	// Steps 5b, 5c and 5e
	std::vector<std::string> wine_dirs(std::size_t tree) const;
	Result<void> add_wine_dlls();
	void add_wine_dlls_in(std::size_t tree, const std::string &dir);
	Result<void> add_graphics_configs();
	bool take_graphics_config(std::size_t tree, const graphics_config::Kind &kind, const std::string &dir, const std::string &dest);
	Result<void> add_optix_data();

	// Steps 6 and 6b
	Result<void> add_firmware();
	Result<void> check_firmware();

	const DiscoveryInput &in_;
	const Staging &st_;
	DriverSet out_;
	std::vector<std::string> capped_;                    // flavour caps that bit (cap_message)
	std::vector<OtherDriver> other_drivers_;             // find_other_drivers()
	std::map<std::string, std::string> other_flavours_;  // flavour name -> the other driver's version
	std::vector<Listing> listings_;
	std::vector<Entry> entries_;
	std::map<std::string, DriverFile> by_dest_;
};

// The first few of `names` and the count of the rest: one line an operator reads, whatever a broken
// host staged.
std::string first_few(const std::vector<std::string> &names)
{
	constexpr std::size_t NAMED = 3;
	std::string list;
	for (std::size_t i = 0; i < names.size() && i < NAMED; i++)
		list += (list.empty() ? "" : ", ") + names[i];
	if (names.size() > NAMED)
		list += " and " + std::to_string(names.size() - NAMED) + " more";
	return list;
}

}  // namespace

// Which names in a staging directory can be a driver file, before the version is known.
bool could_be_driver_file(std::string_view name)
{
	for (const char *b : HELPER_BINARIES)
		if (name == b)
			return true;
	// A staging tree that is the bound egl_vendor.d (icd.d, vendors, ...) lists them in its root.
	for (const auto &kind : graphics_config::KINDS)
		if (name == kind.name)
			return true;
	for (const char *p : COMPANION_PREFIXES)
		if (name.starts_with(p) && is_library_version(name.substr(std::string_view(p).size())))
			return true;
	if (is_unversioned_library(name))
		return true;
	auto so = name.find(".so.");
	return name.starts_with("lib") && so != std::string_view::npos && is_driver_version(name.substr(so + 4));
}

// ---- discover_driver(): the steps of one discovery, in order.

Result<DriverSet> Discovery::run()
{
	if (st_.trees().empty())
		return fail(make_error("No staging mounts found"));
	for (auto step : {&Discovery::list_scan_dirs, &Discovery::choose_version, &Discovery::select_entries,
			  &Discovery::add_libraries, &Discovery::add_helpers, &Discovery::add_firmware,
			  &Discovery::check_firmware, &Discovery::check_native, &Discovery::add_graphics_configs, &Discovery::add_wine_dlls, &Discovery::add_optix_data, &Discovery::check_closure})
		if (auto r = (this->*step)(); !r)
			return fail(r.error());
	for (auto &[dest, f] : by_dest_)
		out_.files.push_back(std::move(f));
	return std::move(out_);
}

Result<DriverSet> discover_driver(const DiscoveryInput &in)
{
	return Discovery(in).run();
}

// ---- Discovery's first steps

std::string Discovery::display_of(std::size_t tree, const std::string &dir, const std::string &name) const
{
	return fs::join(st_.trees()[tree].display, fs::join(dir, name));
}

std::string Discovery::where() const
{
	std::string w;
	for (const auto &t : st_.trees())
		w += (w.empty() ? "" : ", ") + t.display;
	return w;
}

// A flavour cap that bit: which tree, how many, and the first few it dropped by name.
std::string Discovery::cap_message(std::size_t tree, std::size_t kept, const std::vector<std::string> &ignored) const
{
	// printable() of the line is that of each name: the separators are ASCII, which no UTF-8
	// sequence spans.
	return fs::join(st_.trees()[tree].display, staging_layout::FLAVOUR_PARENT) + " holds " +
	       std::to_string(kept + ignored.size()) + " directories, more than the " + std::to_string(staging_layout::MAX_FLAVOURS) +
	       " flavour directories looked at (current first, then by name): ignoring " + printable(first_few(ignored));
}

// 1. The scanned directories. A host lib dir holds thousands of names; they are listed unsorted
// and only the few that can matter are kept (and sorted) later. Listings come from the memo when
// the directory's identity is unchanged.
Result<void> Discovery::list_scan_dirs()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		std::vector<std::string> ignored;
		const auto flavour_names = st_.flavours(t, &ignored);
		if (!ignored.empty())
			capped_.push_back(cap_message(t, flavour_names.size(), ignored));
		const auto dirs = staging_layout::scan_dirs(flavour_names);
		for (std::size_t i = 0; i < dirs.size(); i++) {
			const std::string &dir = dirs[i];
			const std::string display = fs::join(st_.trees()[t].display, dir);
			// The directory's identity keys the memo: what the settle walk saw (a refresh), or
			// its fstat. It is opened only to be stat'ed or listed; false when it is missing.
			UniqueFd dfd;
			auto open = [&]() -> Result<bool> {
				auto opened = st_.open_dir(t, dir);
				if (!opened)
					return fail(opened.error());
				dfd = std::move(*opened);
				return dfd.valid();
			};
			struct stat dst = {};
			if (const WalkedDir *w = st_.walked_dir(t, dir)) {
				if (w->fd < 0)
					continue;
				dst = w->st;
			} else {
				auto there = open();
				if (!there)
					return fail(there.error());
				if (!*there)
					continue;
				if (::fstat(dfd.get(), &dst) < 0)
					return fail(last_errno_error("Failed to stat " + display));
			}
			const std::string key = identity_key(dst);
			std::vector<std::string> names;
			if (const auto *cached = in_.cache ? in_.cache->listing(key) : nullptr) {
				names = *cached;
			} else {
				if (!dfd) {
					auto there = open();
					if (!there)
						return fail(there.error());
					if (!*there)
						continue;
				}
				auto listed = fs::list_dir(dfd.get(), display, /*sorted=*/false, could_be_driver_file);
				if (!listed)
					return fail(listed.error());
				names = std::move(*listed);
				// A listing with a name that is not plain (skipped with a warning below) is not
				// memoised: the memo is JSON, and every run should say the same about it.
				if (in_.cache && std::all_of(names.begin(), names.end(), [](const std::string &n) { return is_plain_file_name(n); }))
					in_.cache->put_listing(key, names);
			}
			if (!names.empty())
				listings_.push_back(Listing{t, dir, i, std::move(names)});
		}
	}
	return {};
}

// 2. The version: libcuda.so.<v>, agreeing with libnvidia-ml.so.<v>; the kernel module's version
// chooses when several are staged.
Result<void> Discovery::choose_version()
{
	std::map<std::string, std::string> cuda_versions, nvml_versions;  // version -> first path seen
	for (const auto &l : listings_) {
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
	std::string capped;
	for (const auto &c : capped_)
		capped += "; " + c;
	if (cuda_versions.empty())
		return fail(make_error("No libcuda.so.<version> found in the staging mounts (" + where() + ")" + capped, EXIT_NOT_READY, ENOENT));
	std::string version;
	if (cuda_versions.size() == 1) {
		version = cuda_versions.begin()->first;
	} else if (in_.kernel_version && cuda_versions.count(*in_.kernel_version)) {
		version = *in_.kernel_version;
	} else {
		std::vector<std::string> paths;
		for (const auto &[v, p] : cuda_versions)
			paths.push_back(p);
		return fail(make_error("Found " + std::to_string(cuda_versions.size()) +
				       " driver versions in the staging mounts and no kernel module version to choose: " + first_few(paths)));
	}
	if (!nvml_versions.count(version)) {
		if (nvml_versions.empty())
			return fail(make_error("No libnvidia-ml.so." + version + " found in the staging mounts (" + where() +
						       "), libcuda is " + cuda_versions[version],
					       EXIT_NOT_READY, ENOENT));
		return fail(make_error("Driver version mismatch: " + cuda_versions[version] + " but " +
				       nvml_versions.begin()->second));
	}
	out_.libcuda_display = cuda_versions[version];
	out_.version = version;
	for (const auto &c : capped_)
		out_.warnings.push_back(c);
	find_other_drivers();
	return {};
}

// 2b. Where another driver lives: a scanned directory with a libcuda.so.<v> of another version
// and none of this one (Debian's nvidia/<flavour>/ of the other flavour, or a tree that is one).
// Nothing is taken from it, nor through a link into it, whatever the name: a file without the
// version in its name (libnvidia-api.so.1, nvidia-smi) would otherwise come from the other
// driver. A flavour of that name elsewhere (a tree bound from /usr/lib/nvidia/<flavour>, a link
// through one) is the other driver's too, unless this driver has a flavour of the same name.
void Discovery::find_other_drivers()
{
	std::set<std::string> ours;
	for (const auto &l : listings_) {
		std::optional<std::string> other;
		bool mine = false;
		for (const auto &n : l.names)
			if (auto v = version_suffix(n, "libcuda.so.")) {
				if (*v == out_.version)
					mine = true;
				else if (!other)
					other = v;
			}
		const std::string prefix = std::string(staging_layout::FLAVOUR_PARENT) + "/";
		const std::string flavour = l.dir.starts_with(prefix) && l.dir.find('/', prefix.size()) == std::string::npos
						    ? l.dir.substr(prefix.size())
						    : std::string();
		if (mine && !flavour.empty())
			ours.insert(flavour);
		if (mine || !other)
			continue;
		other_drivers_.push_back(OtherDriver{l.tree, l.dir, *other});
		if (!flavour.empty())
			other_flavours_.emplace(flavour, *other);
		out_.notes.push_back("Taking nothing from " + fs::join(st_.trees()[l.tree].display, l.dir) + ", which holds driver " +
				     *other + ", not " + out_.version);
	}
	for (const auto &f : ours)
		other_flavours_.erase(f);
	for (std::size_t t = 0; t < st_.trees().size(); t++)
		for (const auto &[f, v] : other_flavours_) {
			// Appended, not "/" + ...: g++ 12 at -O3 on aarch64 warns (-Wrestrict) about the
			// insert at position 0 that operator+(const char *, string &&) inlines.
			std::string suffix = "/";
			suffix.append(staging_layout::FLAVOUR_PARENT).append("/").append(f);
			if (st_.trees()[t].host_prefix.ends_with(suffix)) {
				other_drivers_.push_back(OtherDriver{t, "", v});
				out_.notes.push_back("Taking nothing from " + st_.trees()[t].display + " (the host's " + st_.trees()[t].host_prefix +
						     "), which is driver " + v + "'s, not " + out_.version + "'s");
			}
		}
}

// Why tree/rel, or a file reached through `via`, is another driver's ("" when it is not).
std::string Discovery::other_driver_of(std::size_t tree, const std::string &rel, const std::vector<std::string> &via) const
{
	const std::string dir = fs::dirname(rel) == "." ? std::string() : fs::dirname(rel);
	for (const auto &o : other_drivers_)
		if (o.tree == tree && (o.dir.empty() || dir == o.dir || dir.starts_with(o.dir + "/")))
			return concat({"a file of driver ", o.version, " (", fs::join(st_.trees()[tree].display, o.dir), "), not ", out_.version});
	for (const auto &target : via)
		for (const auto &[f, v] : other_flavours_)
			if (target.find(concat({"/", staging_layout::FLAVOUR_PARENT, "/", f, "/"})) != std::string::npos)
				return concat({"through ", target, ", a file of driver ", v, " (flavour ", f, "), not ", out_.version});
	return {};
}

// 3. The entries that can matter for this version, in a stable order (tree, scan dir, name).
Result<void> Discovery::select_entries()
{
	const std::string lib_suffix = ".so." + out_.version;
	for (const auto &l : listings_) {
		const bool vdpau = l.dir.ends_with("vdpau");
		for (const auto &n : l.names) {
			const bool keep = (n.starts_with("lib") && n.ends_with(lib_suffix)) || is_companion(n) || is_helper(n) ||
					  is_unversioned_library(n);
			if (keep && !is_plain_file_name(n)) {
				out_.warnings.push_back("Skipping " + printable(display_of(l.tree, l.dir, n)) +
							", its name has characters no driver file has");
				continue;
			}
			if (keep && !other_driver_of(l.tree, fs::join(l.dir, n)).empty())
				continue;  // said once for the directory
			if (keep)
				entries_.push_back(Entry{l.tree, fs::join(l.dir, n), n, vdpau, display_of(l.tree, l.dir, n), l.scan_index});
		}
	}
	std::sort(entries_.begin(), entries_.end(), [&](const Entry &a, const Entry &b) {
		return std::tuple(a.tree, a.scan_index, a.name) < std::tuple(b.tree, b.scan_index, b.name);
	});
	return {};
}

// ---- From a staging entry to the file the root takes

// A file for the root; the first source for a destination wins, a different file for the same
// destination is reported.
void Discovery::add(DriverFile f)
{
	auto it = by_dest_.find(f.dest);
	if (it != by_dest_.end()) {
		const auto &a = it->second.source.st, &b = f.source.st;
		if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			out_.warnings.push_back("Ignoring " + f.source.display + ", " + f.dest + " is already taken from " +
						it->second.source.display);
		return;
	}
	by_dest_.emplace(f.dest, std::move(f));
}

Result<ResolvedFile> Discovery::resolve_regular(const Entry &e) const
{
	auto r = st_.resolve(e.tree, e.rel);
	if (!r)
		return fail(r.error());
	if (!S_ISREG(r->st.st_mode))
		return fail(errno_error(EINVAL, "Refusing " + e.display + (e.display == r->display ? "" : " (-> " + r->display + ")") +
							", not a regular file"));
	if (auto why = other_driver_of(r->tree, r->rel, r->via); !why.empty())
		return fail(make_error("Refusing " + e.display + " (-> " + r->display + "), " + why, EXIT_NOT_READY, EXDEV));
	return r;
}

// ELF facts (machine, DT_SONAME), from the memo when the inode is unchanged.
Result<elf::Info> Discovery::elf_info(const ResolvedFile &src) const
{
	const std::string key = identity_key(src.st);
	if (in_.cache)
		if (auto hit = in_.cache->elf(key))
			return *hit;
	auto fd = st_.open_regular(src);
	if (!fd)
		return fail(fd.error());
	auto info = elf::read_info(fd->get(), src.display);
	if (info && in_.cache)
		in_.cache->put_elf(key, *info);
	return info;
}

// A file a tree may or may not hold (a DLSS DLL, a graphics configuration file): nullopt when it is
// not there, or when resolving it failed otherwise, which is a warning naming `what`.
std::optional<ResolvedFile> Discovery::resolve_optional(std::size_t tree, const std::string &rel, std::string_view what)
{
	auto src = st_.resolve(tree, rel);
	if (src && !other_driver_of(tree, rel).empty())
		return std::nullopt;  // in another driver's directory: said once for the directory
	if (src) {
		if (auto why = other_driver_of(src->tree, src->rel, src->via); !why.empty()) {
			out_.warnings.push_back("Skipping " + fs::join(st_.trees()[tree].display, rel) + " (-> " + src->display + "), " + why);
			return std::nullopt;
		}
		return std::move(*src);
	}
	if (src.error().errnum != ENOENT && src.error().errnum != ENOTDIR)
		out_.warnings.push_back(src.error().message + ", skipping this " + std::string(what));
	return std::nullopt;
}

// Whether a file in the root makes entry `e` (not taken: `why`) unnecessary, said in a note: one of
// the same name (in vdpau/ when `e` is), of the multiarch the entry's Debian alternatives link names
// when it names one.
bool Discovery::note_taken_elsewhere(const Entry &e, const std::string &why)
{
	std::string arch;
	if (auto dir = st_.open_dir(e.tree, fs::dirname(e.rel) == "." ? "" : fs::dirname(e.rel)); dir && *dir) {
		const std::string target = fs::read_link_at(dir->get(), e.name).value_or(std::string());
		for (const char *triplet : DEBIAN_TRIPLETS)
			if (target.starts_with("/etc/alternatives/") && target.ends_with(std::string("-") + triplet))
				arch = triplet;
	}
	for (const auto &[dest, f] : by_dest_) {
		if (fs::basename(dest) != e.name || (f.kind == FileKind::Binary) != is_helper(e.name))
			continue;
		const bool in_vdpau = fs::basename(fs::dirname(dest)) == "vdpau";
		if (in_vdpau != e.vdpau)
			continue;
		if (!arch.empty() && f.kind == FileKind::Library && dest.compare(0, 4 + arch.size() + 1, "lib/" + arch + "/") != 0)
			continue;
		out_.notes.push_back("Skipping " + e.display + ": " + why + "; " + e.name + " is taken from " + f.source.display);
		return true;
	}
	return false;
}

// Whether tree/dir/name is a symlink (not followed): a link that does not resolve is a file the host
// meant to give, unlike a name that is not there.
bool Discovery::is_link(std::size_t tree, const std::string &dir, const char *name) const
{
	auto d = st_.open_dir(tree, dir);
	struct stat st = {};
	return d && *d && ::fstatat(d->get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

// Whether the root's native lib dir has a library of this file name or SONAME (a link of the root).
bool Discovery::in_libdir(std::string_view name) const
{
	const std::string dir = "lib/" + out_.multiarch + "/";
	for (const auto &[dest, f] : by_dest_)
		if (f.kind == FileKind::Library && dest.starts_with(dir) && dest.find('/', dir.size()) == std::string::npos &&
		    (std::string_view(dest).substr(dir.size()) == name || (f.soname && *f.soname == name)))
			return true;
	return false;
}

// ---- The driver's libraries and helper binaries, the native architecture check, and the check that every NVIDIA library one of ours loads is in the root.

// 4. lib<name>.so.<v> of this version (no earlier ".so.": libfoo.so.1.so.<v> is not a driver
// library), under lib/<its ELF's multiarch>/; then the companions, the highest version of each.
Result<void> Discovery::add_libraries()
{
	const std::string lib_suffix = ".so." + out_.version;
	std::map<std::string, std::pair<std::string, const Entry *>> companions;  // prefix -> (version, entry)
	std::vector<std::pair<const Entry *, Error>> unresolved;
	auto is_driver_lib = [&](const Entry &e) {
		return e.name.starts_with("lib") && e.name.ends_with(lib_suffix) && e.name.find(".so.") == e.name.size() - lib_suffix.size();
	};
	// A driver is well under 200 libraries, both architectures together. Ten thousand of its
	// version are not a driver, and would cost 42 MiB and a spec over what any reader takes:
	// refused before any is read, with the count.
	if (const auto n = static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(), is_driver_lib)); n > MAX_DRIVER_LIBRARIES)
		return fail(make_error("The staging mounts hold " + std::to_string(n) + " libraries of driver " + out_.version +
					       ", more than the " + std::to_string(MAX_DRIVER_LIBRARIES) + " a driver root is built of",
				       EXIT_NOT_READY, E2BIG));
	for (const auto &e : entries_) {
		const bool driver_lib = is_driver_lib(e);
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
		if (!src) {
			unresolved.emplace_back(&e, src.error());  // fatal unless the library is found elsewhere
			continue;
		}
		auto info = elf_info(*src);
		if (!info)
			return fail(info.error());
		std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
		if (arch.empty())
			return fail(make_error("Unsupported ELF machine " + std::to_string(info->machine) + " in " + src->display));
		add(DriverFile{FileKind::Library, "lib/" + arch + (e.vdpau ? "/vdpau/" : "/") + e.name, std::move(*src), info->soname,
			       std::move(info->needed)});
	}
	// An entry that cannot be resolved is not needed when the library it names is in the root
	// from another entry: Debian's lib dir has libnvidia-nvvm.so.<v> -> /etc/alternatives/
	// nvidia--libnvidia-nvvm.so.<v>-<multiarch>, a host directory no recipe binds, while the
	// real file is in nvidia/current/. Said (which entry, and why), not warned about: nothing
	// is missing.
	for (const auto &[e, error] : unresolved)
		if (!note_taken_elsewhere(*e, error.message))
			return fail(error);
	for (const auto &[prefix, ve] : companions)
		if (auto r = add_optional_library(*ve.second, /*broken_elf_fatal=*/true); !r)
			return r;
	return add_unversioned_libraries();
}

// 4b. UNVERSIONED_LIBRARIES. Optional like the companions, and an unreadable ELF header is only a
// warning: nothing of the driver depends on them. Each architecture's goes to its own lib dir.
// One that cannot be resolved (Debian's lib dir link into /etc/alternatives, or into the other
// flavour) is not missed when its flavour's own file is taken.
Result<void> Discovery::add_unversioned_libraries()
{
	std::vector<std::pair<const Entry *, std::string>> unresolved_optional;
	for (const auto &e : entries_) {
		if (!is_unversioned_library(e.name) || e.vdpau)
			continue;
		if (auto src = resolve_regular(e); !src)
			unresolved_optional.emplace_back(&e, src.error().message);
		else
			(void)add_optional_library(e, /*broken_elf_fatal=*/false);
	}
	for (const auto &[e, why] : unresolved_optional)
		if (!note_taken_elsewhere(*e, why))
			out_.warnings.push_back(why + ", skipping this optional library");
	return {};
}

// A library the root is fine without: one that cannot be resolved is skipped with a warning, one of
// no architecture we know is left out; an ELF header that cannot be read fails the run or is
// another warning, as the caller says.
Result<void> Discovery::add_optional_library(const Entry &e, bool broken_elf_fatal)
{
	auto src = resolve_regular(e);
	if (!src) {
		out_.warnings.push_back(src.error().message + ", skipping this optional library");
		return {};
	}
	auto info = elf_info(*src);
	if (!info) {
		if (broken_elf_fatal)
			return fail(info.error());
		out_.warnings.push_back(info.error().message + ", skipping this optional library");
		return {};
	}
	const std::string arch = elf::multiarch_for(info->machine, info->is_64bit);
	if (!arch.empty())
		add(DriverFile{FileKind::Library, "lib/" + arch + "/" + e.name, std::move(*src), info->soname, std::move(info->needed)});
	return {};
}

// 5. The helper binaries. Useful, not essential (nvidia-ctk treats them the same): a broken one
// is skipped with a warning.
Result<void> Discovery::add_helpers()
{
	std::vector<std::pair<const Entry *, std::string>> skipped;  // said once all entries were tried
	for (const auto &e : entries_) {
		if (!is_helper(e.name))
			continue;
		auto src = resolve_regular(e);
		if (!src) {
			skipped.emplace_back(&e, src.error().message);
			continue;
		}
		if (!(src->st.st_mode & 0111)) {
			skipped.emplace_back(&e, "Skipping " + src->display + ", not executable");
			continue;
		}
		add(DriverFile{FileKind::Binary, "bin/" + e.name, std::move(*src), std::nullopt, {}});
	}
	// /usr/bin/nvidia-smi is a Debian alternatives link; when the real file is staged too (the
	// host bound /usr/lib/nvidia/current) the link is not needed. Otherwise the root has no
	// nvidia-smi, which pods notice: a warning that names what to bind (resolve() says).
	for (const auto &[e, why] : skipped)
		if (!note_taken_elsewhere(*e, why))
			out_.warnings.push_back(why + ", skipping this helper binary");
	return {};
}

// 7. Containers of this machine load libcuda and libnvidia-ml of its own architecture; a 32-bit
// or foreign-architecture copy satisfying the version check would give a root that cannot work.
// Checked here, on the plan, so such staging never replaces a working root.
Result<void> Discovery::check_native()
{
	const std::string native = elf::native_multiarch();
	for (const char *lib : {"libcuda.so.", "libnvidia-ml.so."}) {
		const std::string name = lib + out_.version;
		if (by_dest_.count("lib/" + native + "/" + name))
			continue;
		std::string found;
		for (const auto &[dest, f] : by_dest_)
			if (fs::basename(dest) == name)
				found += (found.empty() ? "" : ", ") + f.source.display + " (" + fs::basename(fs::dirname(dest)) + ")";
		return fail(make_error("No " + native + " " + name + " in the staging mounts" +
				       (found.empty() ? std::string() : ", only " + found) + ": this machine needs its own architecture's driver"));
	}
	out_.multiarch = native;
	return {};
}

// 8. Every NVIDIA library one of ours needs (DT_NEEDED, or loaded by name: RUNTIME_LOADS) is in
// the root, for its architecture. Binding only nvidia/current/ on Debian leaves out the private
// GL libraries (libnvidia-glcore, -eglcore, -glsi, -tls sit in the lib dir itself): EGL and GLX
// then fail in every pod while CUDA works. A warning, not a failure: CUDA pods are fine.
// The image's libraries (libc, libm, libX11, ...) are not ours to check.
Result<void> Discovery::check_closure()
{
	// Most roots have nothing to check (only the GL and EGL libraries need others of ours).
	const bool any = std::any_of(by_dest_.begin(), by_dest_.end(), [&](const auto &d) {
		const auto &f = d.second;
		return f.kind == FileKind::Library &&
		       (!f.needed.empty() || std::any_of(std::begin(RUNTIME_LOADS), std::end(RUNTIME_LOADS), [&](const RuntimeLoad &rl) {
			       return fs::basename(d.first).starts_with(rl.library_prefix);
		       }));
	});
	if (!any)
		return {};
	std::set<std::string, std::less<>> present;  // "<arch>/<name>": file names and the SONAME links made of them
	auto arch_of = [](std::string_view dest) {   // lib/<arch>[/vdpau]/<name>
		dest.remove_prefix(4);
		return dest.substr(0, dest.find('/'));
	};
	auto key = [](std::string_view arch, std::string_view name) {
		std::string k;
		k.reserve(arch.size() + 1 + name.size());
		k.append(arch).append(1, '/').append(name);
		return k;
	};
	for (const auto &[dest, f] : by_dest_) {
		if (f.kind != FileKind::Library)
			continue;
		const std::string_view arch = arch_of(dest);
		present.insert(key(arch, fs::basename(dest)));
		if (f.soname)
			present.insert(key(arch, *f.soname));
	}
	for (const auto &entry : by_dest_) {
		// Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
		const auto &dest = entry.first;
		const auto &f = entry.second;
		if (f.kind != FileKind::Library)
			continue;
		const std::string_view arch = arch_of(dest);
		const std::string name = fs::basename(dest);
		auto check = [&](const std::string &n) {
			if (present.count(key(arch, n)))
				return;
			out_.warnings.push_back(f.source.display + " needs " + n + ", which is not in the staging mounts (" + where() +
						"): bind the host directory that holds it (on Debian /usr/lib/" + std::string(arch) +
						" itself, beside nvidia/current/)");
		};
		for (const auto &n : f.needed)
			check(n);
		for (const auto &rl : RUNTIME_LOADS)
			if (name == rl.library_prefix + out_.version)
				check(rl.loads_prefix + out_.version);
	}
	return {};
}

// ---- What the root takes beside the libraries when the host staged it

// Where a tree may hold the DLSS DLLs: nvidia/wine/ of a host lib dir, and, on Debian, the chosen
// flavour's own nvidia/<flavour>/nvidia/wine/ (never another flavour's: another driver's files).
std::vector<std::string> Discovery::wine_dirs(std::size_t tree) const
{
	std::vector<std::string> dirs{WINE_DIR};
	for (const auto &l : listings_)
		if (l.tree == tree && l.dir.starts_with("nvidia/") && l.dir.find('/', 7) == std::string::npos &&
		    !other_flavours_.count(l.dir.substr(7)))
			dirs.push_back(l.dir + "/" + WINE_DIR);
	return dirs;
}

// 5c. The DLSS DLLs for Proton (WINE_DLLS), where a tree holds nvidia/wine/ (wine_dirs()). After
// check_native, which settles the multiarch they go under. A file of that name that is not a PE file
// (elf.hpp) is skipped with a warning.
Result<void> Discovery::add_wine_dlls()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		struct stat st = {};
		if (::fstatat(st_.trees()[t].fd.get(), "nvidia", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;  // one fstatat for a tree without it: the boot path stays cheap
		for (const auto &dir : wine_dirs(t))
			add_wine_dlls_in(t, dir);
	}
	return {};
}

void Discovery::add_wine_dlls_in(std::size_t t, const std::string &dir)
{
	for (const char *name : WINE_DLLS) {
		const std::string dest = "lib/" + out_.multiarch + "/" + WINE_DIR + "/" + name;
		if (by_dest_.count(dest))
			continue;
		const std::string rel = dir + "/" + name;
		const std::string display = fs::join(st_.trees()[t].display, rel);
		auto src = resolve_optional(t, rel, "DLSS file");
		if (!src)
			continue;
		std::string why;
		if (!S_ISREG(src->st.st_mode))
			why = "not a regular file";
		else if (static_cast<std::uint64_t>(src->st.st_size) > MAX_WINE_DLL_BYTES)
			why = "larger than " + format_bytes(MAX_WINE_DLL_BYTES);
		else if (auto fd = st_.open_regular(*src); !fd)
			why = fd.error().message;
		else if (!pe::is_pe_file(fd->get(), src->st.st_size))
			why = "not a Windows PE file";
		if (!why.empty()) {
			out_.warnings.push_back("Skipping " + display + ": " + why);
			continue;
		}
		add(DriverFile{FileKind::Data, dest, std::move(*src), std::nullopt, {}});
	}
}

// 5b. The graphics configuration files (graphics_config.hpp), where the host bound their directory.
// Only NVIDIA's: by name, then by the library they name, which must be where a pod's loader will
// look for it (after check_native: the root's libraries and multiarch are known). Another vendor's
// file of the same name, one that is not what it claims, one naming a library the pod cannot
// load, or a link that leads out of the staging mounts, is skipped with a warning; a missing one
// is not an error (most compute hosts bind none of these directories).
// Cheap on the boot path: a tree's own root is already listed (the names pass
// could_be_driver_file), and a parent directory is looked into only when its first component
// is a directory of the tree (one fstatat each, remembered per tree).
Result<void> Discovery::add_graphics_configs()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		const std::vector<std::string> *in_root = nullptr;
		for (const auto &l : listings_)
			if (l.tree == t && l.dir.empty())
				in_root = &l.names;
		std::vector<std::pair<std::string_view, bool>> is_dir;  // first component -> a directory of the tree
		auto present = [&](std::string_view dir, std::string_view name) {
			if (dir.empty())
				return in_root && std::find(in_root->begin(), in_root->end(), name) != in_root->end();
			const std::string_view first = dir.substr(0, dir.find('/'));
			for (const auto &[n, d] : is_dir)
				if (n == first)
					return d;
			struct stat st = {};
			const bool d = ::fstatat(st_.trees()[t].fd.get(), std::string(first).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				       S_ISDIR(st.st_mode);
			is_dir.emplace_back(first, d);
			return d;
		};
		for (const auto &kind : graphics_config::KINDS) {
			const std::string_view parent = kind.parent;
			const std::string_view candidates[] = {"", parent.substr(parent.rfind('/') + 1), parent};
			if (std::none_of(std::begin(candidates), std::end(candidates), [&](std::string_view d) { return present(d, kind.name); }))
				continue;
			const std::string dest = std::string(kind.root_dir) + "/" + kind.name;
			if (by_dest_.count(dest))
				continue;
			for (const std::string_view dir_view : candidates) {
				if (!present(dir_view, kind.name))
					continue;
				if (take_graphics_config(t, kind, std::string(dir_view), dest))
					break;
			}
		}
	}
	return {};
}

// One candidate place of a graphics configuration file: true when it decided the file (taken, or
// skipped with a warning), false to try the next place.
bool Discovery::take_graphics_config(std::size_t t, const graphics_config::Kind &kind, const std::string &dir, const std::string &dest)
{
	const std::string rel = fs::join(dir, kind.name);
	const std::string display = fs::join(st_.trees()[t].display, rel);
	auto src = resolve_optional(t, rel, "graphics configuration file");
	if (!src) {
		if (auto r = st_.resolve(t, rel); !r && (r.error().errnum == ENOENT || r.error().errnum == ENOTDIR) &&
						  is_link(t, dir, kind.name)) {
			out_.warnings.push_back(r.error().message + ", skipping this graphics configuration file");
			return true;
		}
		return false;
	}
	if (!S_ISREG(src->st.st_mode)) {
		out_.warnings.push_back("Skipping " + display + ", not a regular file");
		return true;
	}
	auto fd = st_.open_regular(*src);
	if (!fd) {
		out_.warnings.push_back(fd.error().message + ", skipping this graphics configuration file");
		return true;
	}
	auto text = fs::read_fd(fd->get(), src->display, graphics_config::MAX_BYTES);
	std::string why;
	if (!text)
		why = text.error().message;
	else if (const auto lib = graphics_config::nvidia_library_of(kind, *text, src->display, why); lib.empty()) {
		if (why.empty())
			why = src->display + " names no library";
	} else
		why = graphics_config::unloadable(lib, "/lib/" + out_.multiarch, [&](std::string_view n) { return in_libdir(n); });
	if (!why.empty()) {
		out_.warnings.push_back("Skipping " + display + ": " + why);
		return true;
	}
	add(DriverFile{FileKind::Config, dest, std::move(*src), std::nullopt, {}});
	return true;
}

// 5e. nvoptix.bin (OPTIX_DATA), when the root has libnvoptix.so.<version>: first beside it, then
// where a tree is the host's share directory. The file is the library's own version's: one beside
// a library of another version is never taken (a staging tree holds one version's files).
Result<void> Discovery::add_optix_data()
{
	if (!in_.optix_data || by_dest_.count(OPTIX_DATA_DEST))
		return {};
	auto lib = by_dest_.find("lib/" + out_.multiarch + "/libnvoptix.so." + out_.version);
	if (lib == by_dest_.end())
		return {};  // no OptiX in this driver's staged files: nothing reads the data
	std::vector<std::pair<std::size_t, std::string>> candidates{
		{lib->second.source.tree, fs::join(fs::dirname(lib->second.source.rel) == "." ? "" : fs::dirname(lib->second.source.rel), OPTIX_DATA)}};
	for (std::size_t t = 0; t < st_.trees().size(); t++)
		for (const char *rel : OPTIX_DATA_IN_SHARE)
			candidates.emplace_back(t, rel);
	for (const auto &[t, rel] : candidates) {
		auto src = resolve_optional(t, rel, "OptiX data file");
		if (!src)
			continue;
		const std::string display = src->display;
		if (!S_ISREG(src->st.st_mode) || static_cast<std::uint64_t>(src->st.st_size) > MAX_OPTIX_DATA_BYTES) {
			out_.warnings.push_back("Skipping " + display + ": " +
						(S_ISREG(src->st.st_mode) ? "larger than " + format_bytes(MAX_OPTIX_DATA_BYTES) : "not a regular file"));
			continue;
		}
		add(DriverFile{FileKind::Data, OPTIX_DATA_DEST, std::move(*src), std::nullopt, {}});
		return {};
	}
	out_.warnings.push_back(lib->second.source.display + " is in the root but its " + OPTIX_DATA +
				" is not in the staging mounts: OptiX fails in containers; bind the host directory that holds it "
				"(/usr/share/nvidia, or the one beside libnvoptix on Debian)");
	return {};
}

// ---- The GSP firmware of the driver's version, and the warning when a driver that ships it has none staged.

using staging_layout::FIRMWARE_DIRS;

// 6. The GSP firmware of this version.
Result<void> Discovery::add_firmware()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		for (const char *base : FIRMWARE_DIRS) {
			std::string dir = fs::join(base, out_.version);
			auto names = st_.list(t, dir);
			if (!names)
				return fail(names.error());
			for (const auto &n : *names) {
				if (!n.ends_with(".bin"))
					continue;
				const std::string display = fs::join(st_.trees()[t].display, fs::join(dir, n));
				if (!is_plain_file_name(n)) {
					out_.warnings.push_back("Skipping firmware " + printable(display) + ", its name has characters no driver file has");
					continue;
				}
				auto src = resolve_regular(Entry{t, fs::join(dir, n), n, false, display});
				if (!src)
					return fail(src.error());
				add(DriverFile{FileKind::Firmware, "lib/firmware/nvidia/" + out_.version + "/" + n, std::move(*src), std::nullopt, {}});
			}
		}
	}
	return {};
}

// 6b. A driver that ships GSP firmware without it in the root: GPUs that run the GSP (the open
// kernel module, and the default on recent GPUs) then fail to initialise in containers that need
// it. Said, not fatal: many machines never load it from here.
Result<void> Discovery::check_firmware()
{
	const bool have = std::any_of(by_dest_.begin(), by_dest_.end(), [](const auto &f) { return f.second.kind == FileKind::Firmware; });
	const long major = std::strtol(out_.version.c_str(), nullptr, 10);
	if (!have && major >= staging_layout::FIRST_GSP_DRIVER_MAJOR)
		out_.warnings.push_back("No GSP firmware for driver " + out_.version + " in the staging mounts (" + where() +
					"): bind the host's /lib/firmware/nvidia as a staging mount");
	return {};
}

}  // namespace unbounded
