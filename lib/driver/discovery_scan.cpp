// Discovery's first steps: the scanned directories' listings, the driver version, the directories of
// other drivers that nothing is taken from, and the entries that can matter for this version.
#include "discovery.hpp"

#include "bounded_parse.hpp"
#include "discovery_cache.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <sys/stat.h>
#include <map>
#include <set>
#include <tuple>

namespace unbounded {

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
	constexpr std::size_t NAMED = 3;
	std::string names;
	for (std::size_t i = 0; i < ignored.size() && i < NAMED; i++)
		names += (names.empty() ? "" : ", ") + printable(ignored[i]);
	if (ignored.size() > NAMED)
		names += " and " + std::to_string(ignored.size() - NAMED) + " more";
	return fs::join(st_.trees()[tree].display, staging_layout::FLAVOUR_PARENT) + " holds " +
	       std::to_string(kept + ignored.size()) + " directories, more than the " + std::to_string(staging_layout::MAX_FLAVOURS) +
	       " flavour directories looked at (current first, then by name): ignoring " + names;
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
		// A few named and the count: one line an operator reads, whatever a broken host staged.
		constexpr std::size_t NAMED = 3;
		std::string list;
		std::size_t named = 0;
		for (const auto &[v, p] : cuda_versions)
			if (named++ < NAMED)
				list += (list.empty() ? "" : ", ") + p;
		if (cuda_versions.size() > NAMED)
			list += " and " + std::to_string(cuda_versions.size() - NAMED) + " more";
		return fail(make_error("Found " + std::to_string(cuda_versions.size()) +
				       " driver versions in the staging mounts and no kernel module version to choose: " + list));
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

}  // namespace unbounded
