#include "optional_fit.hpp"

#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <set>
#include <sys/statfs.h>

namespace unbounded {
namespace {

std::uint64_t blocks_of(std::uint64_t size, std::uint64_t block)
{
	block = std::max<std::uint64_t>(block, 1);
	return (size + block - 1) / block * block;
}

std::set<std::string> optional_paths(const DriverSet &driver)
{
	std::set<std::string> out;
	for (const auto &f : driver.files)
		if (f.kind == FileKind::Data)
			out.insert(f.dest);
	return out;
}

std::string what(const ManifestEntry &e, const std::string &root_display)
{
	return fs::join(root_display, e.path) + " (" + e.source + ", " + format_bytes(e.size) + ", optional)";
}

void erase(Manifest &plan, const std::vector<LeftOut> &left)
{
	std::set<std::string> out;
	for (const auto &l : left)
		out.insert(l.path);
	std::erase_if(plan.entries, [&](const ManifestEntry &e) { return out.count(e.path) != 0; });
}

}  // namespace

std::uint64_t space_reserve(std::uint64_t total) { return std::clamp<std::uint64_t>(total / 20, 4u << 20, 256u << 20); }

std::optional<FreeSpace> free_space_for(const RootLocation &root)
{
	std::string real = fs::dirname(root.real), display = fs::dirname(root.display);
	for (int depth = 0; depth < 64; depth++) {
		struct statfs st = {};
		if (::statfs(real.c_str(), &st) == 0) {
			if (st.f_blocks == 0)
				return std::nullopt;  // no size to run out of (tmpfs size=0): the copies find out
			const auto bsize = static_cast<std::uint64_t>(st.f_bsize);
			return FreeSpace{static_cast<std::uint64_t>(st.f_bavail) * bsize, static_cast<std::uint64_t>(st.f_blocks) * bsize,
					 bsize, display};
		}
		if (errno != ENOENT || real == "/" || real == "." || real.empty())
			return std::nullopt;
		real = fs::dirname(real);
		display = fs::dirname(display);
	}
	return std::nullopt;
}

std::uint64_t bytes_without_reuse(const Manifest &plan, std::uint64_t block)
{
	std::uint64_t n = 0;
	for (const auto &e : plan.entries)
		if (e.type == ManifestEntry::Type::File)
			n += blocks_of(e.size, block);
	return n;
}

std::vector<LeftOut> leave_out_what_does_not_fit(Manifest &plan, const DriverSet &driver, const Reusable &reusable,
						 const FreeSpace &space, const std::string &root_display)
{
	const std::set<std::string> optional = optional_paths(driver);
	const std::uint64_t reserve = space_reserve(space.total);
	std::uint64_t need = 0;  // the required copies, then each optional one admitted
	std::vector<const ManifestEntry *> costly;
	for (const auto &e : plan.entries) {
		if (e.type != ManifestEntry::Type::File || reusable(e))
			continue;
		if (optional.count(e.path))
			costly.push_back(&e);
		else
			need += blocks_of(e.size, space.block);
	}
	std::vector<LeftOut> left;
	for (const ManifestEntry *e : costly) {
		const std::uint64_t cost = blocks_of(e->size, space.block);
		if (need + cost + reserve <= space.available) {
			need += cost;
			continue;
		}
		left.push_back({e->path, "Leaving out " + what(*e, root_display) + ": not enough space in " + space.where + " (" +
						 format_bytes(space.available) + " free, " + format_bytes(need + cost) +
						 " needed with " + format_bytes(reserve) + " kept free); pods get the rest of the driver; give " +
						 space.where + " more room to serve it"});
	}
	erase(plan, left);
	return left;
}

std::vector<LeftOut> leave_out_all_copied(Manifest &plan, const DriverSet &driver, const Reusable &reusable,
					  const std::string &root_display, const std::string &why)
{
	const std::set<std::string> optional = optional_paths(driver);
	std::vector<LeftOut> left;
	for (const auto &e : plan.entries)
		if (e.type == ManifestEntry::Type::File && optional.count(e.path) && !reusable(e))
			left.push_back({e.path, "Leaving out " + what(e, root_display) + ": " + why + "; pods get the rest of the driver"});
	erase(plan, left);
	return left;
}

Reusable reusable_in(int live_fd, const Manifest *live_manifest)
{
	if (live_fd < 0 || !live_manifest)
		return [](const ManifestEntry &) { return false; };
	return [live_fd, live_manifest](const ManifestEntry &e) {
		const ManifestEntry *o = live_manifest->find(e.path);
		struct stat ost = {};
		return o && o->type == ManifestEntry::Type::File && o->source_id == e.source_id && o->size == e.size &&
		       o->mtime_ns == e.mtime_ns && o->mode == e.mode &&
		       ::fstatat(live_fd, e.path.c_str(), &ost, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ost.st_mode) &&
		       static_cast<std::uint64_t>(ost.st_size) == e.size && mtime_ns(ost) == e.mtime_ns && (ost.st_mode & 07777) == e.mode;
	};
}

}  // namespace unbounded
