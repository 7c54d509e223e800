#include "confined_open.hpp"

#include "chase.hpp"

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace unbounded {
namespace {

std::atomic<bool> user_space_only{false};

Result<UniqueFd> errno_result(int e, std::string_view path)
{
	return fail(errno_error(e, "Failed to open " + std::string(path)));
}

// The walk openat2 would do, by the one resolver: symlinks read and resolved against the
// directories walked so far, never above `root`; then the final open.
Result<UniqueFd> walk(int root, std::string_view path, const ConfinedOpen &how)
{
	const bool path_only = (how.flags & O_PATH) && !(how.flags & ~(O_PATH | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY));
	Chase flags = how.confinement == Confinement::Beneath ? Chase::Beneath : Chase::InRoot;
	if (!how.follow_last)
		flags = flags | Chase::NoFollow;
	if (path_only)
		flags = flags | Chase::OpenLast;  // the O_PATH fd of the inode walked to is the answer
	auto c = chase(root, path, ChaseHow{flags, how.steps, {}});
	if (!c)
		return errno_result(c.error().errnum, path);
	if (c->name.empty()) {  // "" or only "." and "..": the directory reached
		if (how.flags & O_PATH)
			return UniqueFd(::openat(c->dir.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
		UniqueFd f(::openat(c->dir.get(), ".", how.flags | O_CLOEXEC));
		if (!f)
			return errno_result(errno, path);
		return f;
	}
	if (path_only)
		return std::move(c->fd);
	// The final open, by name again (O_NOFOLLOW), checked to be the inode just walked to.
	UniqueFd f(::openat(c->dir.get(), c->name.c_str(), how.flags | O_NOFOLLOW | O_CLOEXEC));
	if (!f)
		return errno_result(errno, path);
	struct stat again = {};
	if (::fstat(f.get(), &again) < 0)
		return errno_result(errno, path);
	if (again.st_dev != c->st.st_dev || again.st_ino != c->st.st_ino)
		return errno_result(EAGAIN, path);  // replaced while we looked: the caller sees a failure
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
