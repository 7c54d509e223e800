// Installing a driver root: stale trees removed, a temp tree beside the live one filled (reused
// files hard-linked, the rest copied by the copy pool), checked, swapped in with renameat2(), and the
// tree that was live before held until the caller commits or rolls back.
#include "driver_root.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "optional_fit.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <optional>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace unbounded {

// ---- Installing a driver root

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

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

// Owns the temp tree under the parent directory and removes it on every exit path until the swap hands
// it over; a kill -9 leaves it for the next run, which removes every ".driver-*" it finds.
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

// Whether a directory at the driver root's path that has no manifest may be replaced: an empty one,
// or the previous implementation's layout (directories of symlinks into the staging mounts, and
// relative links between its own entries). Anything else is someone's data: a configured
// `driver_root: /var/lib` must never make setup swap out and delete kubelet's state.
Result<void> check_replaceable(int dirfd, const RootLocation &root)
{
	const std::string staging_prefix = root.staging + "/";
	std::size_t seen = 0;
	std::string offender;
	auto bad = [&](const std::string &rel) {
		offender = fs::join(root.display, rel);
		return false;
	};
	auto walk = [&](auto &&self, int fd, const std::string &rel) -> bool {
		auto names = fs::list_dir(fd, fs::join(root.display, rel), /*sorted=*/true);
		if (!names)
			return bad(rel);
		for (const auto &n : *names) {
			const std::string child = fs::join(rel, n);
			struct stat st = {};
			if (++seen > 100000 || ::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0)
				return bad(child);
			if (S_ISLNK(st.st_mode)) {
				const std::string target = fs::read_link_at(fd, n).value_or(std::string());
				const bool into_staging = target.starts_with(staging_prefix) && target.find("/../") == std::string::npos;
				const bool sibling = !target.empty() && target.front() != '/' && target.find("..") == std::string::npos;
				if (!into_staging && !sibling)
					return bad(child);
				continue;
			}
			if (!S_ISDIR(st.st_mode))
				return bad(child);
			UniqueFd sub(::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
			if (!sub || !self(self, sub.get(), child))
				return offender.empty() ? bad(child) : false;
		}
		return true;
	};
	if (walk(walk, dirfd, ""))
		return {};
	return fail(make_error("Refusing to replace " + root.display + " (driver_root): it is a directory that " +
			       "unbounded-nvidia-setup did not build (no " + MANIFEST_NAME + ", and " + offender +
			       " is not part of a driver root); point driver_root at a directory of its own"));
}

// Step 2: the live root, the reuse source when it is a real directory with a readable manifest.
struct LiveRoot {
	UniqueFd fd;                // invalid when there is none
	std::string manifest_text;  // "" when it has no readable manifest
};
Result<LiveRoot> open_live_root(int parent_fd, const std::string &base, const RootLocation &root,
				const std::optional<std::string> &known_manifest)
{
	if (struct stat lst = {}; ::fstatat(parent_fd, base.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(lst.st_mode) &&
				  !S_ISLNK(lst.st_mode))
		return fail(make_error("Refusing to replace " + root.display + " (driver_root): it is " +
				       fs::file_type_name(lst.st_mode) + ", not a driver root"));
	LiveRoot live;
	live.fd.reset(::openat(parent_fd, base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
	if (!live.fd)
		return live;
	if (known_manifest)
		live.manifest_text = *known_manifest;
	else if (auto r = check_replaceable(live.fd.get(), root); !r)
		return fail(r.error());
	return live;
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

// ---- The copy pool

struct CopyJob {
	const DriverFile *src;
	const ManifestEntry *entry;
	int dirfd;  // kept open by the caller's directory cache
	std::string name, dest_display;
};

// The CPUs this process may run on (the unit's CPUAffinity=, a cgroup cpuset), at most 8: beyond that
// the copies are bound by memory bandwidth, and every thread is boot-path work of its own.
std::size_t copy_threads_for(std::size_t jobs)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	std::size_t cpus = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? static_cast<std::size_t>(CPU_COUNT(&set)) : 1;
	return std::max<std::size_t>(1, std::min({cpus, jobs, std::size_t(8)}));
}

bool same_content_stamp(const struct stat &a, const struct stat &b)
{
	return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
	       a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// Copies one staging file into dir/name. The source is re-checked after the copy (size, mtime and
// ctime, which no utimes() can restore): a host rewriting a library in place while we copy would
// give a torn file that still has the right size and mtime. Such a file is copied once more; a
// second torn copy fails the run.
Result<std::uint64_t> copy_source(const DriverFile &src, const ManifestEntry &e, int dirfd, const std::string &name,
				  const std::string &dest_display)
{
	for (int attempt = 0;; attempt++) {
		UniqueFd in(::openat(src.source.dir.get(), src.source.name.c_str(),
				     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
		if (!in)
			return fail(last_errno_error("Failed to open " + src.source.display));
		struct stat before = {};
		if (::fstat(in.get(), &before) < 0)
			return fail(last_errno_error("Failed to stat " + src.source.display));
		if (!S_ISREG(before.st_mode) || before.st_ino != src.source.st.st_ino || before.st_dev != src.source.st.st_dev ||
		    static_cast<std::uint64_t>(before.st_size) != e.size || mtime_ns(before) != e.mtime_ns)
			return fail(errno_error(ESTALE, "Failed to copy " + src.source.display + ", it changed during setup"));
		(void)::unlinkat(dirfd, name.c_str(), 0);  // a torn first attempt
		UniqueFd out(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
		if (!out)
			return fail(last_errno_error("Failed to create " + dest_display));
		// Planned size plus one byte at most: more is "modified while being copied", never a full /run.
		auto n = fs::copy_fd(in.get(), out.get(), e.size, src.source.display + " to " + dest_display, e.size + 1);
		if (!n)
			return fail(n.error());
		struct stat after = {};
		if (::fstat(in.get(), &after) < 0)
			return fail(last_errno_error("Failed to stat " + src.source.display));
		if (*n != e.size || !same_content_stamp(before, after)) {
			if (attempt == 0)
				continue;
			return fail(errno_error(ESTALE, "Failed to copy " + src.source.display +
								", it was modified while being copied (twice)"));
		}
		const struct timespec times[2] = {src.source.st.st_atim, src.source.st.st_mtim};
		if (::fchmod(out.get(), e.mode) < 0 || ::futimens(out.get(), times) < 0)
			return fail(last_errno_error("Failed to set attributes of " + dest_display));
		return *n;
	}
}

// dirs/rel under `base`, made where missing (0755) and opened without following symlinks; `cache`
// keeps every directory made or opened so far, by its path relative to `base`.
Result<UniqueFd> mkdirs_at(int base, const std::string &rel, std::map<std::string, UniqueFd> &cache, const std::string &display)
{
	if (auto it = cache.find(rel); it != cache.end())
		return UniqueFd(::fcntl(it->second.get(), F_DUPFD_CLOEXEC, 3));
	int parent = base;
	UniqueFd holder;
	std::string sofar;
	for (const auto &c : fs::split_path(rel)) {
		sofar = fs::join(sofar, c);
		if (auto it = cache.find(sofar); it != cache.end()) {
			parent = it->second.get();
			continue;
		}
		if (::mkdirat(parent, c.c_str(), 0755) < 0 && errno != EEXIST)
			return fail(last_errno_error("Failed to create directory " + fs::join(display, sofar)));
		int fd = ::openat(parent, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(last_errno_error("Failed to open directory " + fs::join(display, sofar)));
		auto [it, _] = cache.emplace(sofar, UniqueFd(fd));
		parent = it->second.get();
	}
	return UniqueFd(::fcntl(parent, F_DUPFD_CLOEXEC, 3));
}

// Copies run on a small pool: a datacenter driver is a few files of hundreds of MB and many small
// ones, and one core copying tmpfs to tmpfs leaves the others idle on the boot path. Largest first,
// so the last file to finish is a small one. Each copy is what copy_source() is alone (its own fds,
// no buffers beyond copy_file_range's), so the torn-copy, ENOSPC and kill -9 guarantees hold per file;
// the first failure stops the others from starting and is the one reported.
struct CopiesDone {
	std::uint64_t bytes = 0;
	std::size_t threads = 0;
};
Result<CopiesDone> run_copies(std::vector<CopyJob> &jobs)
{
	std::stable_sort(jobs.begin(), jobs.end(), [](const CopyJob &a, const CopyJob &b) { return a.entry->size > b.entry->size; });
	std::atomic<std::size_t> next{0};
	std::atomic<bool> failed{false};
	std::atomic<std::uint64_t> bytes{0};
	std::mutex error_mutex;
	std::optional<std::pair<std::size_t, Error>> first_error;  // by job order, so the report is stable
	auto worker = [&] {
		for (std::size_t i; !failed && (i = next++) < jobs.size();) {
			const CopyJob &j = jobs[i];
			auto n = copy_source(*j.src, *j.entry, j.dirfd, j.name, j.dest_display);
			if (n) {
				bytes += *n;
				continue;
			}
			failed = true;
			std::lock_guard<std::mutex> lock(error_mutex);
			if (!first_error || i < first_error->first)
				first_error.emplace(i, n.error());
		}
	};
	const std::size_t threads = copy_threads_for(jobs.size());
	std::vector<std::thread> pool;
	for (std::size_t t = 1; t < threads; t++)
		pool.emplace_back(worker);
	worker();
	for (auto &t : pool)
		t.join();
	if (first_error)
		return fail(first_error->second);
	return CopiesDone{bytes.load(), threads};
}

// ---- The new tree

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
	const Reusable reusable = reusable_in(live.fd.get(), live_manifest);
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
		if (reusable(e) && ::linkat(live.fd.get(), e.path.c_str(), dfd->get(), name.c_str(), 0) == 0) {
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

// Prefix of temp trees beside the root: ".driver-" for /run/nvidia/driver. concat, not "." + ...:
// g++ 12 at -O3 reports a -Wrestrict overlap in the inlined operator+ (GCC PR 105329, format.hpp).
std::string temp_prefix(const std::string &root_path) { return concat({".", fs::basename(root_path), "-"}); }

}  // namespace

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
					 std::optional<PreviousRoot> &previous, const std::optional<std::string> &known_manifest)
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
	previous.emplace(std::move(*pfd), base, guard.release(), root.display, *exchanged);
	return stats;
}

// ---- The tree that was live before a swap, held until the caller commits or rolls back.

PreviousRoot::PreviousRoot(UniqueFd parent, std::string base, std::string held_name, std::string display, bool existed)
	: parent_(std::move(parent)), base_(std::move(base)), held_(std::move(held_name)), display_(std::move(display)),
	  existed_(existed)
{
}

PreviousRoot::~PreviousRoot()
{
	if (!done_)
		(void)commit();
}

Result<void> PreviousRoot::commit()
{
	done_ = true;
	if (!existed_)
		return {};
	return fs::remove_tree_at(parent_.get(), held_, fs::join(fs::dirname(display_), held_));
}

Result<void> PreviousRoot::rollback()
{
	done_ = true;
	const std::string held_display = fs::join(fs::dirname(display_), held_);
	if (existed_) {
		if (::renameat2(parent_.get(), held_.c_str(), parent_.get(), base_.c_str(), RENAME_EXCHANGE) < 0)
			return fail(last_errno_error("Failed to put the previous " + display_ + " back"));
	} else if (::renameat2(parent_.get(), base_.c_str(), parent_.get(), held_.c_str(), RENAME_NOREPLACE) < 0) {
		return fail(last_errno_error("Failed to move the new " + display_ + " away"));
	}
	return fs::remove_tree_at(parent_.get(), held_, held_display);
}

}  // namespace unbounded
