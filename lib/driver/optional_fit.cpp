#include "optional_fit.hpp"

#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <set>
#include <sys/statfs.h>

namespace unbounded {
namespace {

std::uint64_t blocks_of(std::uint64_t size, std::uint64_t block)
{
	block = std::max<std::uint64_t>(block, 1);
	return (size + block - 1) / block * block;
}

// A planned file the new tree can hard-link from the live one (what reuse_live_file() will find, as far
// as the manifests tell: the live tree's own files are checked again when the link is made).
bool reusable(const ManifestEntry &e, const Manifest *live)
{
	const ManifestEntry *o = live ? live->find(e.path) : nullptr;
	return o && o->type == ManifestEntry::Type::File && o->source_id == e.source_id && o->size == e.size &&
	       o->mtime_ns == e.mtime_ns && o->mode == e.mode;
}

}  // namespace

std::uint64_t space_reserve(std::uint64_t total) { return std::max<std::uint64_t>(total / 20, 4u << 20); }

std::optional<FreeSpace> free_space_for(const RootLocation &root)
{
	std::string real = fs::dirname(root.real), display = fs::dirname(root.display);
	for (int depth = 0; depth < 64; depth++) {
		struct statfs st{};
		if (::statfs(real.c_str(), &st) == 0) {
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

std::uint64_t bytes_without_reuse(const Manifest &plan)
{
	std::uint64_t n = 0;
	for (const auto &e : plan.entries)
		if (e.type == ManifestEntry::Type::File)
			n += e.size;
	return n;
}

std::vector<LeftOut> leave_out_what_does_not_fit(Manifest &plan, const DriverSet &driver, const Manifest *live,
						 const FreeSpace &space)
{
	std::set<std::string> optional;
	for (const auto &f : driver.files)
		if (f.kind == FileKind::Data)
			optional.insert(f.dest);
	const std::uint64_t reserve = space_reserve(space.total);
	std::uint64_t need = 0;  // the required copies, then each optional one admitted
	std::vector<const ManifestEntry *> costly;
	for (const auto &e : plan.entries) {
		if (e.type != ManifestEntry::Type::File || reusable(e, live))
			continue;
		if (optional.count(e.path))
			costly.push_back(&e);
		else
			need += blocks_of(e.size, space.block);
	}
	std::set<std::string> out;
	std::vector<LeftOut> left;
	for (const ManifestEntry *e : costly) {
		const std::uint64_t cost = blocks_of(e->size, space.block);
		if (need + cost + reserve <= space.available) {
			need += cost;
			continue;
		}
		out.insert(e->path);
		left.push_back({e->path, "Leaving out " + e->path + " (" + e->source + ", " + format_bytes(e->size) +
				   ", optional): not enough space in " + space.where + " (" + format_bytes(space.available) +
				   " free, " + format_bytes(need + cost) + " needed with " + format_bytes(reserve) +
				   " kept free); pods get the rest of the driver; give " + space.where +
				   " more room to serve it"});
	}
	if (!out.empty())
		std::erase_if(plan.entries, [&](const ManifestEntry &e) { return out.count(e.path) != 0; });
	return left;
}

std::optional<Manifest> read_live_manifest(const RootLocation &root)
{
	auto parent = fs::open_dir(fs::dirname(root.real));
	if (!parent)
		return std::nullopt;
	auto dir = fs::open_dir_at(parent->get(), fs::basename(root.real), root.display);
	if (!dir)
		return std::nullopt;
	const std::string display = root.display + "/" + MANIFEST_NAME;
	auto text = fs::read_file_at(dir->get(), MANIFEST_NAME, display, MAX_MANIFEST_BYTES);
	if (!text)
		return std::nullopt;
	auto m = Manifest::from_json(*text, display);
	return m ? std::optional<Manifest>(std::move(*m)) : std::nullopt;
}

}  // namespace unbounded
