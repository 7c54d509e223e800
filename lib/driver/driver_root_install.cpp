// Installing a driver root: stale trees removed, a temp tree beside the live one filled (reused
// files hard-linked, the rest copied), checked, and swapped in with renameat2().
#include "driver_root.hpp"

#include "driver_root_steps.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <cerrno>
#include <fcntl.h>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <utility>

namespace unbounded {

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

using namespace root_build;

namespace {

const char *fs_name(long type)
{
	switch (static_cast<unsigned long>(type)) {
	case TMPFS_MAGIC: return "tmpfs";
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x794C7630: return "overlayfs";
	default: return "other";
	}
}

// Owns the temp tree (or, after the exchange, the old tree) under the parent directory and removes it
// on every exit path; a kill -9 leaves it for the next run, which removes every ".driver-*" it finds.
class TempTree {
public:
	TempTree(int parent_fd, std::string name, std::string display)
		: parent_(parent_fd), name_(std::move(name)), display_(std::move(display)) {}
	TempTree(const TempTree &) = delete;
	TempTree &operator=(const TempTree &) = delete;
	~TempTree()
	{
		if (!name_.empty())
			(void)fs::remove_tree_at(parent_, name_, display_);
	}
	Result<void> remove()
	{
		auto r = fs::remove_tree_at(parent_, name_, display_);
		name_.clear();
		return r;
	}
	const std::string &name() const { return name_; }
	std::string release() { return std::exchange(name_, std::string()); }

private:
	int parent_;
	std::string name_, display_;
};

// Step 1: temp and old trees a killed run left behind. We hold the lock, so nobody else owns them. One
// that cannot be removed (something is mounted inside it) stays aside under its temp name, with a
// warning: it must never keep the machine from getting a driver root.
Result<void> remove_stale_trees(int parent_fd, const std::string &prefix, const std::string &parent_display, InstallStats &stats)
{
	auto names = fs::list_dir(parent_fd, parent_display);
	if (!names)
		return fail(names.error());
	for (const auto &n : *names) {
		if (!n.starts_with(prefix))
			continue;
		if (auto r = fs::remove_tree_at(parent_fd, n, fs::join(parent_display, n)); !r) {
			stats.warnings.push_back(r.error().message + "; leaving it aside");
			stats.stale_trees_kept++;
			continue;
		}
		stats.stale_trees_removed++;
	}
	return {};
}

// Step 3: the new tree's directory beside the old one, under a name the next run recognises.
Result<std::string> make_temp_dir(int parent_fd, const std::string &prefix, const std::string &parent_display)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		std::string name = prefix + fs::random_suffix();
		if (::mkdirat(parent_fd, name.c_str(), 0755) == 0)
			return name;
		if (errno != EEXIST)
			return fail(last_errno_error("Failed to create " + fs::join(parent_display, name)));
	}
	return fail(errno_error(EEXIST, "Failed to create a temporary directory in " + parent_display));
}

// Step 4: every entry of the plan in the temp tree: directories, links and reused files in plan
// order, then the copies on the thread pool.
Result<void> populate_tree(int tree_fd, const std::string &tree_display, const DriverSet &driver, const Manifest &plan,
			   const LiveRoot &live, const Manifest *live_manifest, const RootLocation &root, InstallStats &stats)
{
	std::map<std::string, const DriverFile *> sources;
	for (const auto &f : driver.files)
		sources[f.dest] = &f;
	std::map<std::string, UniqueFd> dirs;  // outlives the copies, which use its fds
	std::vector<CopyJob> copies;
	for (const auto &e : plan.entries) {
		const std::string dir = fs::dirname(e.path) == "." ? "" : fs::dirname(e.path), name = fs::basename(e.path);
		auto dfd = mkdirs_at(tree_fd, dir, dirs, tree_display);
		if (!dfd)
			return fail(dfd.error());
		const std::string dest_display = fs::join(root.display, e.path);
		if (e.type == ManifestEntry::Type::Link) {
			if (::symlinkat(e.target.c_str(), dfd->get(), name.c_str()) < 0)
				return fail(last_errno_error("Failed to create symlink " + dest_display));
			continue;
		}
		if (reuse_live_file(live, live_manifest, e, dfd->get(), name)) {
			stats.files_reused++;
			stats.bytes_reused += e.size;
			continue;
		}
		// The directory fd from the cache, which outlives the copies (dfd is a duplicate that does not).
		const int dirfd = dir.empty() ? tree_fd : dirs.at(dir).get();
		copies.push_back(CopyJob{sources.at(e.path), &e, dirfd, name, dest_display});
	}
	auto copied = run_copies(copies);
	if (!copied)
		return fail(copied.error());
	stats.files_copied += copies.size();
	stats.bytes_copied += copied->bytes;
	stats.copy_threads = copied->threads;
	return {};
}

// Step 5: the manifest goes last: a tree with a manifest is a complete tree.
Result<void> write_manifest(int tree_fd, const std::string &text, const std::string &display)
{
	int mfd = ::openat(tree_fd, MANIFEST_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (mfd < 0)
		return fail(last_errno_error("Failed to create " + display));
	UniqueFd m(mfd);
	if (auto r = fs::write_all(m.get(), text, display); !r)
		return fail(r.error());
	if (::fchmod(m.get(), 0644) < 0)
		return fail(last_errno_error("Failed to set mode of " + display));
	return {};
}

// Step 6: the swap. With no live root, a plain rename (RENAME_NOREPLACE, so a racing creator is not
// clobbered); otherwise exchange, whatever the live entry is (a directory, or a symlink from an
// older layout). Returns whether it exchanged (the temp name then holds the old tree).
Result<bool> swap_in(int parent_fd, const std::string &tmp_name, const std::string &base, const std::string &tmp_display,
		     const std::string &display)
{
	if (::renameat2(parent_fd, tmp_name.c_str(), parent_fd, base.c_str(), RENAME_NOREPLACE) == 0)
		return false;
	if (errno != EEXIST)
		return fail(last_errno_error("Failed to move " + tmp_display + " to " + display));
	if (::renameat2(parent_fd, tmp_name.c_str(), parent_fd, base.c_str(), RENAME_EXCHANGE) < 0)
		return fail(last_errno_error("Failed to exchange " + tmp_display + " with " + display));
	return true;
}

// Steps 4 and 5 in the temp tree, then everything that can be checked before the swap, on the new
// tree: a root that would fail verification never replaces one that works.
struct NewTree {
	const std::string &name, &display, &manifest_text;
};
Result<void> fill_temp_tree(int parent_fd, const NewTree &tree, const DriverSet &driver, const Manifest &plan, const LiveRoot &live,
			    const Manifest *live_manifest, const RootLocation &root, InstallStats &stats)
{
	auto tfd = fs::open_dir_at(parent_fd, tree.name, tree.display);
	if (!tfd)
		return fail(tfd.error());
	if (::fchmod(tfd->get(), 0755) < 0)
		return fail(last_errno_error("Failed to set mode of " + tree.display));
	if (auto r = populate_tree(tfd->get(), tree.display, driver, plan, live, live_manifest, root, stats); !r)
		return fail(r.error());
	if (auto r = write_manifest(tfd->get(), tree.manifest_text, root.display + "/" + MANIFEST_NAME); !r)
		return fail(r.error());
	if (auto problems = check_driver_tree(tfd->get(), plan, tree.display); !problems.empty())
		return fail(make_error("The new driver root failed its checks before the swap: " + problems.front().message));
	return {};
}

}  // namespace

// concat, not "." + ...: g++ 12 at -O3 reports a -Wrestrict overlap in the inlined operator+ (GCC PR
// 105329, format.hpp).
std::string temp_prefix(const std::string &root_path) { return concat({".", fs::basename(root_path), "-"}); }

Result<InstallStats> remove_stale_temp_trees(const RootLocation &root)
{
	InstallStats stats;
	auto pfd = fs::open_dir(fs::dirname(root.real));
	if (!pfd)
		return stats;  // no parent yet: nothing left behind
	if (auto r = remove_stale_trees(pfd->get(), temp_prefix(root.real), fs::dirname(root.display), stats); !r)
		return fail(r.error());
	return stats;
}

Result<InstallStats> install_driver_root(const DriverSet &driver, const Manifest &plan, const RootLocation &root,
					 std::optional<PreviousRoot> *previous, const std::optional<std::string> *known_manifest)
{
	InstallStats stats;
	const std::string parent = fs::dirname(root.real), base = fs::basename(root.real);
	const std::string parent_display = fs::dirname(root.display);
	if (auto r = fs::mkdir_p(parent, 0755); !r)
		return fail(r.error());
	auto pfd = fs::open_dir(parent);
	if (!pfd)
		return fail(pfd.error());
	struct statfs sfs = {};
	if (::fstatfs(pfd->get(), &sfs) == 0)
		stats.fstype = fs_name(sfs.f_type);

	const std::string prefix = temp_prefix(root.real);
	if (auto r = remove_stale_trees(pfd->get(), prefix, parent_display, stats); !r)
		return fail(r.error());
	auto live = open_live_root(pfd->get(), base, root, known_manifest);
	if (!live)
		return fail(live.error());

	const std::string manifest_text = plan.to_json();
	for (const auto &e : plan.entries) {
		if (e.type == ManifestEntry::Type::File)
			stats.files++;
		else
			stats.links++;
	}
	// Nothing changed: the live root is what we would build, provided its files still match.
	if (!live->manifest_text.empty() && live->manifest_text == manifest_text &&
	    check_driver_tree(live->fd.get(), plan, root.display).empty()) {
		stats.unchanged = true;
		stats.files_reused = stats.files;
		for (const auto &e : plan.entries)
			stats.bytes_reused += e.size;
		return stats;
	}
	std::optional<Manifest> live_manifest;
	if (!live->manifest_text.empty())
		if (auto m = Manifest::from_json(live->manifest_text, root.display + "/" + MANIFEST_NAME))
			live_manifest = std::move(*m);

	auto tmp_name = make_temp_dir(pfd->get(), prefix, parent_display);
	if (!tmp_name)
		return fail(tmp_name.error());
	const std::string tmp_display = fs::join(parent_display, *tmp_name);
	TempTree guard(pfd->get(), *tmp_name, tmp_display);
	const NewTree tree{*tmp_name, tmp_display, manifest_text};
	if (auto r = fill_temp_tree(pfd->get(), tree, driver, plan, *live, live_manifest ? &*live_manifest : nullptr, root, stats); !r)
		return fail(r.error());

	auto exchanged = swap_in(pfd->get(), *tmp_name, base, tmp_display, root.display);
	if (!exchanged)
		return fail(exchanged.error());
	// The temp name now holds the old tree (or nothing, after a plain rename).
	if (previous) {
		previous->emplace(std::move(*pfd), base, guard.release(), root.display, *exchanged);
		return stats;
	}
	if (auto r = guard.remove(); !r) {
		stats.warnings.push_back(r.error().message + "; the new driver root is in place, the old one is left aside");
		stats.stale_trees_kept++;
	}
	return stats;
}

}  // namespace unbounded
