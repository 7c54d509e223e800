// The file system as the programs use it (fs.hpp): path strings, bounded reads that never follow a
// symlink or block, trust checks, atomic writes, kernel copies, directories and a one-mount rm -rf.
#include "fs.hpp"

#include "format.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace unbounded::fs {

// ---- Path strings: joining, splitting and the --root prefix (no system calls).

std::string root_path(std::string_view root, std::string_view absolute)
{
	if (root.empty() || root == "/")
		return std::string(absolute);
	std::string r{root};
	while (r.size() > 1 && r.back() == '/')
		r.pop_back();
	if (!absolute.empty() && absolute.front() != '/')
		r += '/';
	r += absolute;
	return r;
}

std::string join(std::string_view dir, std::string_view name)
{
	if (dir.empty())
		return std::string(name);
	std::string r{dir};
	if (r.back() != '/')
		r += '/';
	r += name;
	return r;
}

std::string dirname(std::string_view path)
{
	while (path.size() > 1 && path.back() == '/')
		path.remove_suffix(1);
	auto pos = path.rfind('/');
	if (pos == std::string_view::npos)
		return ".";
	if (pos == 0)
		return "/";
	return std::string(path.substr(0, pos));
}

std::string basename(std::string_view path)
{
	while (path.size() > 1 && path.back() == '/')
		path.remove_suffix(1);
	auto pos = path.rfind('/');
	return std::string(pos == std::string_view::npos ? path : path.substr(pos + 1));
}

std::vector<std::string> split_path(std::string_view p)
{
	std::vector<std::string> out;
	std::size_t i = 0;
	while (i < p.size()) {
		std::size_t j = p.find('/', i);
		if (j == std::string_view::npos)
			j = p.size();
		if (j > i)
			out.emplace_back(p.substr(i, j - i));
		i = j + 1;
	}
	return out;
}

// ---- Reading files: regular files only, opened without following a symlink or blocking, bounded.

Result<std::string> read_file_at(int dirfd, const std::string &name, const std::string &display,
				 std::size_t max_bytes)
{
	auto f = open_regular_at(dirfd, name, display);
	if (!f)
		return fail(f.error());
	return read_fd(f->get(), display, max_bytes);
}

Result<UniqueFd> open_regular_at(int dirfd, const std::string &name, const std::string &display)
{
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever (and an
	// O_NOFOLLOW open of a symlink fails with ELOOP instead of reading its target).
	int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ELOOP)
			return fail(errno_error(ELOOP, "Refusing to read " + display + ", it is a symlink"));
		return fail(last_errno_error("Failed to open " + display));
	}
	UniqueFd f(fd);
	if (auto r = require_regular(f.get(), display); !r)
		return fail(r.error());
	return f;
}

Result<void> require_regular(int fd, const std::string &display)
{
	struct stat st = {};
	if (::fstat(fd, &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	if (!S_ISREG(st.st_mode))
		return fail(errno_error(EINVAL, "Refusing to read " + display + ", it is " + file_type_name(st.st_mode) +
							", not a regular file"));
	return {};
}

Result<std::string> read_link_at(int dirfd, const std::string &name, const std::string &display)
{
	char buf[PATH_MAX];
	const ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof(buf));
	const std::string &what = display.empty() ? name : display;
	if (n < 0)
		return fail(last_errno_error("Failed to read symlink " + what));
	if (static_cast<std::size_t>(n) >= sizeof(buf))
		return fail(errno_error(ENAMETOOLONG, "Failed to read symlink " + what));
	return std::string(buf, static_cast<std::size_t>(n));
}

const char *file_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFLNK: return "a symlink";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	default: return "of unknown type";
	}
}

Result<std::string> read_fd(int fd, const std::string &display, std::size_t max_bytes)
{
	std::string out;
	char buf[65536];
	for (;;) {
		ssize_t n = ::read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to read " + display));
		}
		if (n == 0)
			break;
		if (out.size() + static_cast<std::size_t>(n) > max_bytes)
			return fail(errno_error(EFBIG, "Refusing to read " + display + ", it is larger than " +
							       std::to_string(max_bytes) + " bytes"));
		out.append(buf, static_cast<std::size_t>(n));
	}
	return out;
}

Result<std::string> read_file(const std::string &path, std::size_t max_bytes)
{
	return read_file_at(AT_FDCWD, path, path, max_bytes);
}

// ---- What only we may have written: type, owner, mode and link count checked before it is believed.

Result<void> check_trusted(int fd, const std::string &display, bool directory)
{
	struct stat st = {};
	if (::fstat(fd, &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return fail(errno_error(EPERM, "Refusing " + display + ": it is " + file_type_name(st.st_mode) + ", expected " +
						       (directory ? "a directory" : "a regular file")));
	if (st.st_uid != ::geteuid())
		return fail(errno_error(EPERM, "Refusing " + display + ": owned by UID " + std::to_string(st.st_uid) +
						       ", not by UID " + std::to_string(::geteuid())));
	if (st.st_mode & 022)
		return fail(errno_error(EPERM, "Refusing " + display + ": writable by group or others (mode " +
						       format_mode(st.st_mode) + ")"));
	if (!directory && st.st_nlink != 1)
		return fail(errno_error(EPERM, "Refusing " + display + ": it has " + std::to_string(st.st_nlink) + " hard links"));
	return {};
}

std::expected<TrustedText, TrustedFailure> read_trusted_at(int dirfd, const std::string &dir_display, const std::string &name,
							   const std::string &display, std::size_t max_bytes)
{
	auto failed = [](TrustedStep step, Error e) { return std::unexpected(TrustedFailure{step, std::move(e)}); };
	if (!dir_display.empty())
		if (auto r = check_trusted(dirfd, dir_display, /*directory=*/true); !r)
			return failed(TrustedStep::Directory, std::move(r.error()));
	auto fd = open_regular_at(dirfd, name, display);
	if (!fd)
		return failed(TrustedStep::Open, std::move(fd.error()));
	if (auto r = check_trusted(fd->get(), display, /*directory=*/false); !r)
		return failed(TrustedStep::File, std::move(r.error()));
	auto text = read_fd(fd->get(), display, max_bytes);
	if (!text)
		return failed(TrustedStep::Read, std::move(text.error()));
	return TrustedText{std::move(*fd), std::move(*text)};
}

Result<UniqueFd> open_private_dir(const std::string &path, const std::string &display, mode_t mode)
{
	if (auto r = mkdir_p(dirname(path), 0755); !r)
		return fail(r.error());
	if (::mkdir(path.c_str(), mode) < 0 && errno != EEXIST)
		return fail(last_errno_error("Failed to create directory " + display));
	auto d = open_dir_at(AT_FDCWD, path, display);
	if (!d && (d.error().errnum == ELOOP || d.error().errnum == ENOTDIR)) {
		struct stat st = {};
		const char *what = ::lstat(path.c_str(), &st) == 0 ? file_type_name(st.st_mode) : "not a directory";
		return fail(errno_error(EPERM, "Refusing " + display + ": it is " + what + ", expected a directory"));
	}
	if (d)
		if (auto r = check_trusted(d->get(), display, /*directory=*/true); !r)
			return fail(r.error());
	return d;
}

// ---- Writing files: all of the bytes, atomically by rename, or prepared now and committed later.

std::string random_suffix(std::size_t len)
{
	static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char raw[32];
	len = std::min(len, sizeof(raw));
	if (::getrandom(raw, len, GRND_NONBLOCK) != static_cast<ssize_t>(len)) {
		std::random_device rd;
		for (std::size_t i = 0; i < len; i++)
			raw[i] = static_cast<unsigned char>(rd());
	}
	std::string s;
	for (std::size_t i = 0; i < len; i++)
		s += alphabet[raw[i] % (sizeof(alphabet) - 1)];
	return s;
}

Result<void> write_all(int fd, std::string_view data, const std::string &display)
{
	while (!data.empty()) {
		ssize_t n = ::write(fd, data.data(), data.size());
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to write " + display));
		}
		data.remove_prefix(static_cast<std::size_t>(n));
	}
	return {};
}

PreparedWrite::PreparedWrite(PreparedWrite &&other) noexcept
	: dir_(std::move(other.dir_)), tmp_(std::exchange(other.tmp_, {})), base_(std::move(other.base_)),
	  display_(std::move(other.display_)), fsync_(other.fsync_)
{
}

PreparedWrite &PreparedWrite::operator=(PreparedWrite &&other) noexcept
{
	if (this != &other) {
		abandon();
		dir_ = std::move(other.dir_);
		tmp_ = std::exchange(other.tmp_, {});
		base_ = std::move(other.base_);
		display_ = std::move(other.display_);
		fsync_ = other.fsync_;
	}
	return *this;
}

PreparedWrite::~PreparedWrite() { abandon(); }

void PreparedWrite::abandon() noexcept
{
	if (!tmp_.empty() && dir_)
		(void)::unlinkat(dir_.get(), tmp_.c_str(), 0);
	tmp_.clear();
}

Result<void> PreparedWrite::commit(Error *sync_error)
{
	if (tmp_.empty())
		return {};
	if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), base_.c_str()) < 0) {
		Error e = last_errno_error("Failed to rename temporary file to " + display_);
		abandon();
		return fail(e);
	}
	tmp_.clear();
	if (fsync_ && ::fsync(dir_.get()) < 0) {
		Error e = last_errno_error("Failed to sync directory " + dirname(display_));
		if (!sync_error)
			return fail(e);
		*sync_error = std::move(e);
	}
	return {};
}

Result<PreparedWrite> prepare_file_atomic_at(int dirfd, const std::string &base, const std::string &path,
					     std::string_view content, const AtomicWriteOptions &opts)
{
	const std::string dir = dirname(path);
	PreparedWrite w;
	w.base_ = base;
	w.display_ = path;
	w.fsync_ = opts.fsync;
	w.dir_.reset(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
	if (!w.dir_)
		return fail(last_errno_error("Failed to open " + dir));

	// Temp files of a writer that was killed before its rename: callers hold their lock, so any
	// that exist are dead. Removed before the unchanged check too: the killed run may have been
	// writing the very bytes that are now in place.
	const std::string tmp_prefix = "." + base + ".tmp-";
	remove_matching(dirfd, tmp_prefix);

	const auto owner = opts.owner_root ? std::optional(std::pair<uid_t, gid_t>{0, 0}) : opts.owner;
	if (opts.skip_if_unchanged) {
		auto old = read_file_at(dirfd, base, path, content.size() + 1);
		struct stat st = {};
		if (old && *old == content && ::fstatat(dirfd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (st.st_mode & 07777) == opts.mode && (!owner || (st.st_uid == owner->first && st.st_gid == owner->second)))
			return w;
	}

	UniqueFd f;
	for (int attempt = 0; attempt < 100 && !f; attempt++) {
		std::string tmp = tmp_prefix + random_suffix();
		int fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return fail(last_errno_error("Failed to create temporary file in " + dir));
		if (fd >= 0)
			w.tmp_ = std::move(tmp);  // from here on, w removes it unless committed
		f.reset(fd);
	}
	if (!f)
		return fail(errno_error(EEXIST, "Failed to create temporary file in " + dir));

	const std::string tmp_display = join(dir, w.tmp_);
	if (auto r = write_all(f.get(), content, tmp_display); !r)
		return fail(r.error());
	if (owner && ::fchown(f.get(), owner->first, owner->second) < 0)
		return fail(last_errno_error("Failed to set the owner of " + tmp_display));
	if (::fchmod(f.get(), opts.mode) < 0)
		return fail(last_errno_error("Failed to set mode of " + tmp_display));
	if (opts.fsync && ::fsync(f.get()) < 0)
		return fail(last_errno_error("Failed to sync " + tmp_display));
	return w;
}

Result<PreparedWrite> prepare_file_atomic(const std::string &path, std::string_view content, const AtomicWriteOptions &opts)
{
	auto dfd = open_dir(dirname(path));
	if (!dfd)
		return fail(dfd.error());
	return prepare_file_atomic_at(dfd->get(), basename(path), path, content, opts);
}

Result<WriteOutcome> write_file_atomic(const std::string &path, std::string_view content,
				       const AtomicWriteOptions &opts)
{
	auto dfd = open_dir(dirname(path));
	if (!dfd)
		return fail(dfd.error());
	return write_file_atomic_at(dfd->get(), basename(path), path, content, opts);
}

Result<WriteOutcome> write_file_atomic_at(int dirfd, const std::string &base, const std::string &path,
					  std::string_view content, const AtomicWriteOptions &opts)
{
	auto w = prepare_file_atomic_at(dirfd, base, path, content, opts);
	if (!w)
		return fail(w.error());
	const WriteOutcome outcome = w->outcome();
	if (auto r = w->commit(); !r)
		return fail(r.error());
	return outcome;
}

// ---- Copying between file descriptors in the kernel where it can (copy_file_range, then sendfile).

Result<std::uint64_t> copy_fd(int src, int dst, std::uint64_t size_hint, const std::string &display, std::uint64_t limit)
{
	std::uint64_t total = 0;
	enum {
		CFR,
		SENDFILE,
		RW,
	} method = CFR;
	while (total < limit) {
		std::size_t want = size_hint > total ? static_cast<std::size_t>(std::min<std::uint64_t>(size_hint - total, 1u << 30))
						     : (1u << 20);
		want = static_cast<std::size_t>(std::min<std::uint64_t>(want, limit - total));
		ssize_t n = -1;
		if (method == CFR) {
			n = ::copy_file_range(src, nullptr, dst, nullptr, want, 0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
				      errno == EPERM)) {
				method = SENDFILE;
				continue;
			}
		} else if (method == SENDFILE) {
			n = ::sendfile(dst, src, nullptr, want);
			if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
				method = RW;
				continue;
			}
		} else {
			char buf[1 << 16];
			n = ::read(src, buf, std::min(sizeof(buf), want));
			if (n > 0) {
				if (auto r = write_all(dst, std::string_view(buf, static_cast<std::size_t>(n)), display); !r)
					return fail(r.error());
			}
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to copy " + display));
		}
		if (n == 0)
			break;
		total += static_cast<std::uint64_t>(n);
	}
	return total;
}

// ---- Directories: opening, creating, listing, and sweeping the entries of one prefix.

Result<UniqueFd> open_dir_at(int dirfd, const std::string &name, const std::string &display)
{
	int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(last_errno_error("Failed to open directory " + display));
	return UniqueFd(fd);
}

Result<UniqueFd> open_dir(const std::string &path) { return open_dir_at(AT_FDCWD, path, path); }

Result<void> mkdir_p(const std::string &path, mode_t mode)
{
	if (path.empty())
		return {};
	struct stat existing = {};
	if (::stat(path.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode))
		return {};
	std::string cur;
	std::size_t pos = 0;
	while (pos != std::string::npos) {
		pos = path.find('/', pos + 1);
		cur = path.substr(0, pos);
		if (cur.empty() || cur == "/")
			continue;
		if (::mkdir(cur.c_str(), mode) < 0 && errno != EEXIST)
			return fail(last_errno_error("Failed to create directory " + cur));
	}
	struct stat st = {};
	if (::stat(path.c_str(), &st) < 0)
		return fail(last_errno_error("Failed to stat " + path));
	if (!S_ISDIR(st.st_mode))
		return fail(errno_error(ENOTDIR, "Failed to create directory " + path));
	return {};
}

namespace {

// Calls each(name) for the entries of the directory open as `fd` but "." and "..", read where the fd
// stands with getdents64 `size` bytes at a time, until each returns false. False with errno when a
// read fails.
template <class F> bool each_entry(int fd, std::size_t size, F &&each)
{
	alignas(struct dirent64) char buf[16384];
	for (;;) {
		const ssize_t n = ::getdents64(fd, buf, std::min(size, sizeof buf));
		if (n < 0 && errno == EINTR)
			continue;
		// A directory removed while open reads ENOENT: it has no entries left (as readdir() says).
		if (n == 0 || (n < 0 && errno == ENOENT))
			return true;
		if (n < 0)
			return false;
		for (ssize_t off = 0; off < n;) {
			const auto *de = reinterpret_cast<const struct dirent64 *>(buf + off);
			const std::string_view name = de->d_name;
			if (name != "." && name != ".." && !each(name))
				return true;
			off += de->d_reclen;
		}
	}
}

}  // namespace

Result<std::vector<std::string>> list_dir(int dirfd, const std::string &display, bool sorted,
					  bool (*keep)(std::string_view name))
{
	UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd)
		return fail(last_errno_error("Failed to open directory " + display));
	std::vector<std::string> names;
	const bool read = each_entry(fd.get(), SIZE_MAX, [&](std::string_view n) {
		if (!keep || keep(n))
			names.emplace_back(n);
		return true;
	});
	if (!read)
		return fail(last_errno_error("Failed to read directory " + display));
	if (sorted)
		std::sort(names.begin(), names.end());
	return names;
}

Result<std::vector<std::string>> list_dir_once(int dirfd, const std::string &display)
{
	std::vector<std::string> names;
	const bool read = each_entry(dirfd, SIZE_MAX, [&](std::string_view n) {
		names.emplace_back(n);
		return true;
	});
	if (!read)
		return fail(last_errno_error("Failed to read directory " + display));
	return names;
}

Result<bool> dir_is_empty(int dirfd, const std::string &display)
{
	UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd)
		return fail(last_errno_error("Failed to open directory " + display));
	// A small getdents64 buffer: three entries decide it, no need to read a lib dir's first 32 KiB.
	bool empty = true;
	if (!each_entry(fd.get(), 512, [&](std::string_view) { return empty = false; }))
		return fail(last_errno_error("Failed to read directory " + display));
	return empty;
}

void remove_matching(int dirfd, std::string_view prefix)
{
	// Read as it stands and removed as it is read: a textfile directory of 300,000 entries costs
	// one small buffer, not a list of every name (the sweep before this kept them all: 79 MiB).
	UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd)
		return;
	(void)each_entry(fd.get(), SIZE_MAX, [&](std::string_view name) {
		if (name.starts_with(prefix))
			(void)::unlinkat(dirfd, name.data(), 0);  // the entry's d_name, NUL-terminated
		return true;
	});
}

// ---- rm -rf that never follows a symlink and never leaves the mount it starts on.

namespace {

// The mount an open file lives on (statx STATX_MNT_ID, else /proc/self/fdinfo), or -1 if unknown.
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
