// rm -rf that never follows a symlink and never leaves the mount it starts on.
#include "fs.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::fs {

long long mount_id_of(int fd)
{
	struct statx stx = {};
	if (::statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 && (stx.stx_mask & STATX_MNT_ID) &&
	    stx.stx_mnt_id != 0)
		return static_cast<long long>(stx.stx_mnt_id);
	// Kernels before 5.8, and emulators that pass the mask through but not the field (qemu-user 7.2
	// answers STATX_MNT_ID with 0, which would make every bind mount look like ours): fdinfo has it.
	auto info = read_file("/proc/self/fdinfo/" + std::to_string(fd), 4096);
	if (!info)
		return -1;
	auto pos = info->find("mnt_id:");
	if (pos == std::string::npos)
		return -1;
	return std::strtoll(info->c_str() + pos + 7, nullptr, 10);
}

namespace {

// One level of remove_tree_at: `sub` is an open directory on mount `mnt`. Entries that cannot be
// removed (a mount point below) are counted in `busy`; the rest of the tree is still removed.
Result<void> remove_contents(int sub, long long mnt, dev_t dev, const std::string &display, std::string &busy)
{
	auto names = list_dir(sub, display, /*sorted=*/false);
	if (!names)
		return fail(names.error());
	for (const auto &n : *names) {
		const std::string child = join(display, n);
		if (::unlinkat(sub, n.c_str(), 0) == 0 || errno == ENOENT)
			continue;
		if (errno == EBUSY) {  // a file bind-mounted over this name
			if (busy.empty())
				busy = child;
			continue;
		}
		if (errno != EISDIR && errno != EPERM)
			return fail(last_errno_error("Failed to remove " + child));
		UniqueFd cfd(::openat(sub, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
		if (!cfd) {
			if (errno == ENOENT)
				continue;
			return fail(last_errno_error("Failed to open " + child));
		}
		struct stat cst = {};
		if (::fstat(cfd.get(), &cst) < 0)
			return fail(last_errno_error("Failed to stat " + child));
		const long long cmnt = mount_id_of(cfd.get());
		if (cst.st_dev != dev || (mnt >= 0 && cmnt != mnt)) {
			// A mount point: never descend into another file system's files.
			if (busy.empty())
				busy = child;
			continue;
		}
		if (auto r = remove_contents(cfd.get(), mnt, dev, child, busy); !r)
			return r;
		cfd.reset();
		if (::unlinkat(sub, n.c_str(), AT_REMOVEDIR) < 0 && errno != ENOENT) {
			if (errno == ENOTEMPTY || errno == EBUSY) {
				if (busy.empty())
					busy = child;
				continue;
			}
			return fail(last_errno_error("Failed to remove directory " + child));
		}
	}
	return {};
}

}  // namespace

Result<void> remove_tree_at(int dirfd, const std::string &name, const std::string &display)
{
	if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT)
		return {};
	if (errno == EBUSY)
		return fail(errno_error(EBUSY, "Failed to remove " + display + ", it is a mount point"));
	if (errno != EISDIR && errno != EPERM)
		return fail(last_errno_error("Failed to remove " + display));

	UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
	if (!sub) {
		if (errno == ENOENT)
			return {};
		return fail(last_errno_error("Failed to open " + display));
	}
	// The directory that holds `name` (name may have several components, dirfd may be AT_FDCWD).
	UniqueFd parent(::openat(dirfd, name.find('/') == std::string::npos ? "." : dirname(name).c_str(),
				 O_PATH | O_DIRECTORY | O_CLOEXEC));
	struct stat pst = {}, st = {};
	if (!parent || ::fstat(parent.get(), &pst) < 0 || ::fstat(sub.get(), &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	const long long mnt = mount_id_of(sub.get());
	if (st.st_dev != pst.st_dev || (mnt >= 0 && mnt != mount_id_of(parent.get())))
		return fail(errno_error(EBUSY, "Failed to remove " + display + ", it is a mount point"));
	std::string busy;
	if (auto r = remove_contents(sub.get(), mnt, st.st_dev, display, busy); !r)
		return r;
	sub.reset();
	if (!busy.empty())
		return fail(errno_error(EBUSY, "Failed to remove " + display + ", " + busy + " is a mount point"));
	if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) < 0 && errno != ENOENT)
		return fail(last_errno_error("Failed to remove directory " + display));
	return {};
}

}  // namespace unbounded::fs
