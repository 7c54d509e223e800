// Reading files: regular files only, opened without following a symlink or blocking, bounded.
#include "fs.hpp"

#include <cerrno>
#include <climits>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::fs {

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

}  // namespace unbounded::fs
