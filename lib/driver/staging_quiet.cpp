#include "staging_quiet.hpp"

#include "nvidia_machine.hpp"
#include "staging.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/stat.h>
#include <thread>

namespace unbounded {
namespace {

Millis since(const struct timespec &t)
{
	struct timespec now = {};
	::clock_gettime(CLOCK_REALTIME, &now);
	const long long ms = (static_cast<long long>(now.tv_sec) - t.tv_sec) * 1000 + (now.tv_nsec - t.tv_nsec) / 1'000'000;
	return Millis(ms);
}

}  // namespace

DirIdentity DirIdentity::of(std::uint32_t slot, const struct stat &st)
{
	return DirIdentity{slot, st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

bool DirIdentity::operator==(const DirIdentity &o) const
{
	auto same = [](const struct timespec &a, const struct timespec &b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; };
	return slot == o.slot && dev == o.dev && ino == o.ino && size == o.size && same(mtime, o.mtime) && same(ctime, o.ctime);
}

StagingWatch StagingWatch::open(const Context &ctx)
{
	StagingWatch w;
	w.real_parent_ = ctx.real(ctx.config.staging);
	w.display_parent_ = ctx.config.staging;
	return w;
}

namespace {

// One walk: the identities found, in order, and (when asked) their directories kept open with what
// the walk saw of each tree.
struct Walk {
	StagingStamp stamp;
	std::vector<UniqueFd> *keep = nullptr;
	std::uint32_t slot = 0;

	// Looks for one directory: `opened` is what the open just returned (errno tells why it failed),
	// -1 when missing. The fd stays valid until the walk ends (in `scratch` when not kept); -1 in the
	// result when missing (with the errno when the open failed for another reason than its not being
	// there, or a directory).
	WalkedDir add(int opened, std::vector<UniqueFd> &scratch)
	{
		const int open_errno = errno;
		UniqueFd fd(opened);
		const std::uint32_t s = slot++;
		WalkedDir d;
		if (!fd) {
			if (open_errno != ENOENT && open_errno != ENOTDIR && open_errno != ELOOP)
				d.error = open_errno;
			return d;
		}
		if (::fstat(fd.get(), &d.st) < 0) {
			d.error = errno;
			return d;
		}
		stamp.dirs.push_back(DirIdentity::of(s, d.st));
		if (timespec_less(stamp.newest, d.st.st_ctim))
			stamp.newest = d.st.st_ctim;
		d.fd = fd.get();
		if (keep && keep->size() < StagingWatch::MAX_HELD)
			keep->push_back(std::move(fd));
		else
			scratch.push_back(std::move(fd));  // closed when its tree is done
		return d;
	}

	static bool timespec_less(const struct timespec &a, const struct timespec &b)
	{
		return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
	}
};

int open_path_dir(int parent, const char *name)
{
	return ::openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Stamps dir (a path of plain components below the tree) and each of its parents not yet stamped;
// a missing one ends its branch. `tree.dirs` holds the paths already looked for in this tree: the
// watched directories share their parents (nvidia/, nvidia/<flavour>/), which are opened once.
void stamp_dir(Walk &w, WalkedTree &tree, const std::string &dir, std::vector<UniqueFd> &scratch)
{
	int parent = tree.dirs.at("").fd;
	std::string prefix;
	for (const auto &c : fs::split_path(dir)) {
		prefix += (prefix.empty() ? "" : "/") + c;
		auto it = tree.dirs.find(prefix);
		if (it == tree.dirs.end())
			it = tree.dirs.emplace(prefix, w.add(open_path_dir(parent, c.c_str()), scratch)).first;
		if (it->second.fd < 0)
			return;
		parent = it->second.fd;
	}
}

// One tree: the tree, nvidia/ (opened once, for its times and its flavours), then the directories
// discovery reads and the firmware directories.
void walk_tree(Walk &w, WalkedTree &tree, int tree_fd, std::vector<UniqueFd> &scratch)
{
	// Stamped before it is listed: an entry made in between shows in the check after the pass.
	const WalkedDir nvidia = w.add(::openat(tree_fd, staging_layout::FLAVOUR_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), scratch);
	if (nvidia.fd >= 0)
		tree.flavours = staging_layout::flavours_in(nvidia.fd, &tree.ignored_flavours);
	tree.dirs.emplace(staging_layout::FLAVOUR_PARENT, nvidia);
	for (const auto &dir : staging_layout::scan_dirs(tree.flavours))
		stamp_dir(w, tree, dir, scratch);
	for (const char *dir : staging_layout::FIRMWARE_DIRS)
		stamp_dir(w, tree, dir, scratch);
}

}  // namespace

StagingStamp StagingWatch::walk(std::vector<UniqueFd> *keep, std::vector<WalkedTree> *trees) const
{
	Walk w;
	w.keep = keep;
	std::vector<UniqueFd> scratch;
	auto pfd = fs::open_dir(real_parent_);
	if (!pfd)
		return w.stamp;
	// Stamped before it is listed: a tree made in between shows in the check after the pass.
	const int parent = w.add(pfd->release(), scratch).fd;
	if (parent < 0)
		return w.stamp;
	auto names = fs::list_dir(parent, display_parent_);
	if (!names)
		return w.stamp;
	std::sort(names->begin(), names->end(), numeric_name_less);  // the order Staging::open gives
	for (const auto &n : *names) {
		if (!is_staging_entry(n))
			continue;
		std::vector<UniqueFd> tree_scratch;  // this tree's directories not kept: closed when it is done
		WalkedTree tree;
		tree.name = n;
		const WalkedDir root = w.add(open_path_dir(parent, n.c_str()), tree_scratch);
		if (root.fd < 0)
			continue;  // not a directory (or a symlink): not a staging tree
		tree.dirs.emplace("", root);
		walk_tree(w, tree, root.fd, tree_scratch);
		if (trees)
			trees->push_back(std::move(tree));
	}
	if (keep && keep->size() != w.stamp.dirs.size()) {
		keep->clear();  // over MAX_HELD: changed_since walks, discovery opens afresh
		if (trees)
			trees->clear();
	}
	return w.stamp;
}

StagingStamp StagingWatch::stamp()
{
	held_.clear();
	trees_.clear();
	// Before the walk: a mount made while it runs polls as a change.
	mountinfo_.reset(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
	return walk(&held_, &trees_);
}

// Whether the mount table changed since mountinfo_ was opened (the kernel's mount namespace event
// count, compared on poll).
bool StagingWatch::mounts_changed() const
{
	struct pollfd p = {mountinfo_.get(), POLLPRI, 0};
	const int r = ::poll(&p, 1, 0);
	return r < 0 || (r > 0 && (p.revents & (POLLPRI | POLLERR)) != 0);  // an error: walk to know
}

bool StagingWatch::changed_since(const StagingStamp &was) const
{
	if (held_.empty() || held_.size() != was.dirs.size() || !mountinfo_ || mounts_changed())
		return !(walk(nullptr, nullptr) == was);
	// The staging parent by its path (its own parent is not watched: it may have been replaced);
	// the rest through the directories the walk kept.
	struct stat st = {};
	if (::fstatat(AT_FDCWD, real_parent_.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    !(DirIdentity::of(was.dirs[0].slot, st) == was.dirs[0]))
		return true;
	for (std::size_t i = 1; i < held_.size(); i++)
		if (::fstat(held_[i].get(), &st) < 0 || !(DirIdentity::of(was.dirs[i].slot, st) == was.dirs[i]))
			return true;
	return false;
}

QuietWait wait_for_quiet_staging(const Context &ctx, Millis settle, Millis limit)
{
	using clock = std::chrono::steady_clock;
	const auto start = clock::now();
	QuietWait w;
	for (bool napped = false;; napped = true) {
		w.watch = StagingWatch::open(ctx);  // afresh: trees and directories come and go
		w.stamp = w.watch.stamp();
		w.waited = std::chrono::duration_cast<Millis>(clock::now() - start);
		const Millis quiet = since(w.stamp.newest);
		if (quiet >= settle) {
			if (!napped)  // quiet at the first look: no wait, however long the look took (qemu: ms)
				w.waited = Millis(0);
			return w;
		}
		if (w.waited >= limit) {
			w.gave_up = true;
			return w;
		}
		// Sleep until the newest change is settle old (a change time in the future, from a clock
		// step, is waited out in settle-sized steps up to the limit).
		Millis nap = quiet < Millis(0) ? settle : settle - quiet;
		nap = std::min(std::max(nap, Millis(50)), limit - w.waited);
		w.watch = StagingWatch{};  // nothing of staging held open while it naps (a host's umount would be EBUSY)
		std::this_thread::sleep_for(nap);
	}
}

}  // namespace unbounded
