// Directories: opening, creating, listing, and sweeping the entries of one prefix.
#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace unbounded::fs {

Result<UniqueFd> open_dir(const std::string &path)
{
	int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(last_errno_error("Failed to open directory " + path));
	return UniqueFd(fd);
}

Result<UniqueFd> open_dir_at(int dirfd, const std::string &name, const std::string &display)
{
	int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(last_errno_error("Failed to open directory " + display));
	return UniqueFd(fd);
}

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

Result<std::vector<std::string>> list_dir(int dirfd, const std::string &display, bool sorted,
					  bool (*keep)(std::string_view name))
{
	int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail(last_errno_error("Failed to open directory " + display));
	DIR *d = ::fdopendir(fd);
	if (!d) {
		int e = errno;
		::close(fd);
		return fail(errno_error(e, "Failed to read directory " + display));
	}
	std::vector<std::string> names;
	errno = 0;
	while (struct dirent *de = ::readdir(d)) {
		std::string_view n = de->d_name;
		if (n != "." && n != ".." && (!keep || keep(n)))
			names.emplace_back(n);
		errno = 0;
	}
	int e = errno;
	::closedir(d);
	if (e)
		return fail(errno_error(e, "Failed to read directory " + display));
	if (sorted)
		std::sort(names.begin(), names.end());
	return names;
}

Result<std::vector<std::string>> list_dir_once(int dirfd, const std::string &display)
{
	alignas(struct dirent64) char buf[16384];
	std::vector<std::string> names;
	for (;;) {
		const ssize_t n = ::getdents64(dirfd, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to read directory " + display));
		}
		if (n == 0)
			return names;
		for (ssize_t off = 0; off < n;) {
			const auto *de = reinterpret_cast<const struct dirent64 *>(buf + off);
			const std::string_view name = de->d_name;
			if (name != "." && name != "..")
				names.emplace_back(name);
			off += de->d_reclen;
		}
	}
}

Result<bool> dir_is_empty(int dirfd, const std::string &display)
{
	UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd)
		return fail(last_errno_error("Failed to open directory " + display));
	// A small getdents64 buffer: three entries decide it, no need to read a lib dir's first 32 KiB.
	alignas(8) char buf[512];
	for (;;) {
		long n = ::syscall(SYS_getdents64, fd.get(), buf, sizeof(buf));
		if (n < 0)
			return fail(last_errno_error("Failed to read directory " + display));
		if (n == 0)
			return true;
		for (long off = 0; off < n;) {
			const auto *de = reinterpret_cast<const struct dirent64 *>(buf + off);
			std::string_view name = de->d_name;
			if (name != "." && name != "..")
				return false;
			off += de->d_reclen;
		}
	}
}

void remove_matching(int dirfd, std::string_view prefix)
{
	// Read as it stands and removed as it is read: a textfile directory of 300,000 entries costs
	// one small buffer, not a list of every name (the sweep before this kept them all: 79 MiB).
	int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = ::fdopendir(fd);
	if (!d) {
		::close(fd);
		return;
	}
	while (const dirent *e = ::readdir(d)) {
		const std::string_view name = e->d_name;
		if (name.starts_with(prefix))
			(void)::unlinkat(dirfd, e->d_name, 0);
	}
	::closedir(d);
}

}  // namespace unbounded::fs
