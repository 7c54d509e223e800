#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace unbounded::fs {

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
	struct stat existing{};
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
	struct stat st{};
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

Result<void> remove_tree_at(int dirfd, const std::string &name, const std::string &display)
{
	if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT)
		return {};
	if (errno != EISDIR && errno != EPERM)
		return fail(last_errno_error("Failed to remove " + display));

	int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return {};
		return fail(last_errno_error("Failed to open " + display));
	}
	UniqueFd sub(fd);
	auto names = list_dir(sub.get(), display);
	if (!names)
		return fail(names.error());
	for (const auto &n : *names) {
		auto r = remove_tree_at(sub.get(), n, join(display, n));
		if (!r)
			return r;
	}
	if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) < 0 && errno != ENOENT)
		return fail(last_errno_error("Failed to remove directory " + display));
	return {};
}

Result<std::string> read_file_at(int dirfd, const std::string &name, const std::string &display,
				 std::size_t max_bytes)
{
	int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(last_errno_error("Failed to open " + display));
	UniqueFd f(fd);
	struct stat st{};
	if (::fstat(f.get(), &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	if (!S_ISREG(st.st_mode))
		return fail(errno_error(EINVAL, "Refusing to read " + display + ", not a regular file"));
	return read_fd(f.get(), display, max_bytes);
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
			return fail(errno_error(EFBIG, "Failed to read " + display));
		out.append(buf, static_cast<std::size_t>(n));
	}
	return out;
}

Result<std::string> read_file(const std::string &path, std::size_t max_bytes)
{
	return read_file_at(AT_FDCWD, path, path, max_bytes);
}

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

Result<WriteOutcome> write_file_atomic(const std::string &path, std::string_view content,
				       const AtomicWriteOptions &opts)
{
	const std::string dir = dirname(path), base = basename(path);
	auto dfd = open_dir(dir);
	if (!dfd)
		return fail(dfd.error());

	if (opts.skip_if_unchanged) {
		auto old = read_file_at(dfd->get(), base, path, content.size() + 1);
		struct stat st{};
		if (old && *old == content && ::fstatat(dfd->get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (st.st_mode & 07777) == opts.mode)
			return WriteOutcome::Unchanged;
	}

	// Temp files of a writer that was killed before its rename: callers hold their lock, so any
	// that exist are dead.
	const std::string tmp_prefix = "." + base + ".tmp-";
	if (auto names = list_dir(dfd->get(), dir, /*sorted=*/false))
		for (const auto &n : *names)
			if (n.starts_with(tmp_prefix))
				(void)::unlinkat(dfd->get(), n.c_str(), 0);

	std::string tmp;
	UniqueFd f;
	for (int attempt = 0; attempt < 100 && !f; attempt++) {
		tmp = tmp_prefix + random_suffix();
		int fd = ::openat(dfd->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return fail(last_errno_error("Failed to create temporary file in " + dir));
		f.reset(fd);
	}
	if (!f)
		return fail(errno_error(EEXIST, "Failed to create temporary file in " + dir));

	auto cleanup = [&] { (void)::unlinkat(dfd->get(), tmp.c_str(), 0); };
	if (auto r = write_all(f.get(), content, join(dir, tmp)); !r) {
		cleanup();
		return fail(r.error());
	}
	if (::fchmod(f.get(), opts.mode) < 0) {
		Error e = last_errno_error("Failed to set mode of " + join(dir, tmp));
		cleanup();
		return fail(e);
	}
	if (opts.fsync && ::fsync(f.get()) < 0) {
		Error e = last_errno_error("Failed to sync " + join(dir, tmp));
		cleanup();
		return fail(e);
	}
	f.reset();
	if (::renameat(dfd->get(), tmp.c_str(), dfd->get(), base.c_str()) < 0) {
		Error e = last_errno_error("Failed to rename temporary file to " + path);
		cleanup();
		return fail(e);
	}
	if (opts.fsync && ::fsync(dfd->get()) < 0)
		return fail(last_errno_error("Failed to sync directory " + dir));
	return WriteOutcome::Written;
}

Result<std::uint64_t> copy_fd(int src, int dst, std::uint64_t size_hint, const std::string &display)
{
	std::uint64_t total = 0;
	enum { CFR, SENDFILE, RW } method = CFR;
	for (;;) {
		std::size_t want = size_hint > total ? static_cast<std::size_t>(std::min<std::uint64_t>(size_hint - total, 1u << 30))
						     : (1u << 20);
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
			n = ::read(src, buf, sizeof(buf));
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

}  // namespace unbounded::fs
