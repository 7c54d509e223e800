#include "lock.hpp"

#include "fs.hpp"

#include <fcntl.h>
#include <optional>
#include <sys/file.h>

namespace unbounded {

static Result<UniqueFd> open_lock(const std::string &real_path, const std::string &display)
{
	if (auto r = fs::mkdir_p(fs::dirname(real_path), 0755); !r)
		return fail(r.error());
	int fd = ::open(real_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(last_errno_error("Failed to open lock file " + display));
	return UniqueFd(fd);
}

Result<RunLock> RunLock::acquire(const std::string &real_path, const std::string &display,
				 const std::function<void()> &on_wait)
{
	auto fd = open_lock(real_path, display);
	if (!fd)
		return fail(fd.error());
	if (::flock(fd->get(), LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return fail(last_errno_error("Failed to lock " + display));
		if (on_wait)
			on_wait();
		while (::flock(fd->get(), LOCK_EX) < 0)
			if (errno != EINTR)
				return fail(last_errno_error("Failed to lock " + display));
	}
	RunLock l;
	l.fd_ = std::move(*fd);
	return l;
}

Result<std::optional<RunLock>> RunLock::try_acquire(const std::string &real_path, const std::string &display)
{
	auto fd = open_lock(real_path, display);
	if (!fd)
		return fail(fd.error());
	if (::flock(fd->get(), LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return std::optional<RunLock>{};
		return fail(last_errno_error("Failed to lock " + display));
	}
	RunLock l;
	l.fd_ = std::move(*fd);
	return std::optional<RunLock>(std::move(l));
}

}  // namespace unbounded
