#include "confined_open.hpp"

#include "fs.hpp"

#include <atomic>
#include <cerrno>
#include <deque>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace unbounded {
namespace {

constexpr int MAX_SYMLINKS = 40;  // what the kernel allows
std::atomic<bool> user_space_only{false};

Result<UniqueFd> errno_result(int e, std::string_view path)
{
	return fail(errno_error(e, "Failed to open " + std::string(path)));
}

std::deque<std::string> components(std::string_view p)
{
	std::deque<std::string> out;
	for (auto &c : fs::split_path(p))
		out.push_back(std::move(c));
	return out;
}

// The walk openat2 would do: one component at a time with O_NOFOLLOW, symlinks read and resolved
// against the stack of directories walked so far, never above `root`.
Result<UniqueFd> walk(int root, std::string_view path, const ConfinedOpen &how)
{
	std::vector<UniqueFd> dirs;
	dirs.emplace_back(::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (!dirs.back())
		return errno_result(errno, path);
	std::deque<std::string> todo = components(path);
	int symlinks = 0;
	while (!todo.empty()) {
		if (how.steps && (*how.steps)-- == 0) {
			*how.steps = 0;
			return errno_result(ETIMEDOUT, path);
		}
		const std::string c = std::move(todo.front());
		todo.pop_front();
		if (c == ".")
			continue;
		if (c == "..") {
			if (dirs.size() > 1)
				dirs.pop_back();
			else if (how.confinement == Confinement::Beneath)
				return errno_result(EXDEV, path);
			continue;
		}
		const bool last = todo.empty();
		if (!last) {
			// Most components are directories: O_DIRECTORY says so without an fstat (a symlink
			// fails it with ENOTDIR under O_NOFOLLOW and is looked at below), which halves the
			// system calls of a walk through long chains.
			UniqueFd d(::openat(dirs.back().get(), c.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
			if (d) {
				dirs.push_back(std::move(d));
				continue;
			}
			if (errno != ENOTDIR)
				return errno_result(errno, path);
		}
		UniqueFd fd(::openat(dirs.back().get(), c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
		if (!fd)
			return errno_result(errno, path);
		struct stat st{};
		if (::fstat(fd.get(), &st) < 0)
			return errno_result(errno, path);
		if (S_ISLNK(st.st_mode) && (!last || how.follow_last)) {
			if (++symlinks > MAX_SYMLINKS)
				return errno_result(ELOOP, path);
			char buf[4096];
			ssize_t n = ::readlinkat(fd.get(), "", buf, sizeof(buf));
			if (n < 0)
				return errno_result(errno, path);
			if (static_cast<std::size_t>(n) >= sizeof(buf))
				return errno_result(ENAMETOOLONG, path);
			const std::string_view target(buf, static_cast<std::size_t>(n));
			if (target.starts_with('/')) {
				if (how.confinement == Confinement::Beneath)
					return errno_result(EXDEV, path);
				dirs.resize(1);
			}
			auto more = components(target);
			todo.insert(todo.begin(), more.begin(), more.end());
			continue;
		}
		if (last) {
			if ((how.flags & O_PATH) && !(how.flags & ~(O_PATH | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY)))
				return fd;
			// The final open, by name again (O_NOFOLLOW), checked to be the inode just walked to.
			UniqueFd f(::openat(dirs.back().get(), c.c_str(), how.flags | O_NOFOLLOW | O_CLOEXEC));
			if (!f)
				return errno_result(errno, path);
			struct stat again{};
			if (::fstat(f.get(), &again) < 0)
				return errno_result(errno, path);
			if (again.st_dev != st.st_dev || again.st_ino != st.st_ino)
				return errno_result(EAGAIN, path);  // replaced while we looked: the caller sees a failure
			return f;
		}
		if (!S_ISDIR(st.st_mode))
			return errno_result(ENOTDIR, path);
		dirs.push_back(std::move(fd));
	}
	// "" or only "." and "..": the directory reached
	if (how.flags & O_PATH)
		return UniqueFd(::openat(dirs.back().get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
	UniqueFd f(::openat(dirs.back().get(), ".", how.flags | O_CLOEXEC));
	if (!f)
		return errno_result(errno, path);
	return f;
}

}  // namespace

Result<UniqueFd> open_confined(int root, std::string_view path, const ConfinedOpen &how)
{
	if (!user_space_only) {
		if (how.steps && (*how.steps)-- == 0) {
			*how.steps = 0;
			return errno_result(ETIMEDOUT, path);
		}
		open_how oh{};
		oh.flags = static_cast<std::uint64_t>(how.flags | O_CLOEXEC | (how.follow_last ? 0 : O_NOFOLLOW));
		oh.resolve = (how.confinement == Confinement::InRoot ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS;
		// openat2 takes the path relative to root: leading slashes go, and nothing left is ".".
		// The string is made once from the trimmed view (trimming a std::string in place and
		// assigning "." to it made g++ 12 -O3 report a -Wrestrict false positive, GCC PR 105329).
		std::string_view trimmed = path;
		while (!trimmed.empty() && trimmed.front() == '/')
			trimmed.remove_prefix(1);
		const std::string rel = trimmed.empty() ? std::string(".") : std::string(trimmed);
		// EAGAIN: a rename or mount anywhere on the system during a walk through ".." (the kernel
		// cannot rule out an escape then). On a busy machine that is common with long "d/../"
		// chains; a few retries, then the user-space walk, which answers the same without the race.
		for (int attempt = 0; attempt < 3; attempt++) {
			long fd = ::syscall(SYS_openat2, root, rel.c_str(), &oh, sizeof(oh));
			if (fd >= 0)
				return UniqueFd(static_cast<int>(fd));
			if (errno != EAGAIN)
				break;
		}
		if (errno != ENOSYS && errno != EAGAIN)
			return errno_result(errno, path);
	}
	return walk(root, path, how);
}

namespace testing {
void force_user_space_walk(bool on) { user_space_only = on; }
}  // namespace testing

}  // namespace unbounded
