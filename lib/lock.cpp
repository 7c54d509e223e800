#include "lock.hpp"

#include "fs.hpp"

#include <fcntl.h>
#include <optional>
#include <sys/file.h>
#include <thread>

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

std::optional<RunLock> RunLock::wait_shared(const std::string &real_path, std::chrono::milliseconds timeout)
{
	UniqueFd fd(::open(real_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
	if (!fd)
		return std::nullopt;
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	while (::flock(fd.get(), LOCK_SH | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() > deadline)
			return std::nullopt;
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	}
	RunLock l;
	l.fd_ = std::move(fd);
	return l;
}

}  // namespace unbounded
