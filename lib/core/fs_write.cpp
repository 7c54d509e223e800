// Writing files: all of the bytes, atomically by rename, or prepared now and committed later.
#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <random>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace unbounded::fs {

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

Result<PreparedWrite> prepare_file_atomic(const std::string &path, std::string_view content, const AtomicWriteOptions &opts)
{
	auto dfd = open_dir(dirname(path));
	if (!dfd)
		return fail(dfd.error());
	return prepare_file_atomic_at(dfd->get(), basename(path), path, content, opts);
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

}  // namespace unbounded::fs
