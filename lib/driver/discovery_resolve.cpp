// From a staging entry to the file the root takes: resolved, checked to be regular and this driver's,
// its ELF facts (memoised), and which file of the root already stands in for an entry that failed.
#include "discovery.hpp"

#include "discovery_cache.hpp"
#include "fs.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>

namespace unbounded {

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

// The file in the root that makes entry `e` unnecessary: one of the same name (in vdpau/ when
// `e` is), of the multiarch the entry's Debian alternatives link names when it names one.
const DriverFile *Discovery::taken_elsewhere(const Entry &e) const
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
		return &f;
	}
	return nullptr;
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

}  // namespace unbounded
