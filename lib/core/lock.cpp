#include "lock.hpp"

#include "fs.hpp"

#include <fcntl.h>
#include <optional>
#include <sys/file.h>
#include <thread>

namespace unbounded {

Result<RunLock> RunLock::acquire(int dirfd, const std::string &name, const std::string &display,
				 const std::function<void(Holder)> &on_wait)
{
	UniqueFd fd(::openat(dirfd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600));
	if (!fd) {
		if (errno == ELOOP)
			return fail(errno_error(ELOOP, "Refusing lock file " + display + ", it is a symlink"));
		return fail(last_errno_error("Failed to open lock file " + display));
	}
	if (auto r = fs::check_trusted(fd.get(), "lock file " + display, /*directory=*/false); !r)
		return fail(r.error());
	if (::flock(fd.get(), LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return fail(last_errno_error("Failed to lock " + display));
		// A shared lock we can take means only readers hold it; it is converted below.
		const bool readers = ::flock(fd.get(), LOCK_SH | LOCK_NB) == 0;
		if (on_wait)
			on_wait(readers ? Holder::Readers : Holder::Writer);
		while (::flock(fd.get(), LOCK_EX) < 0)
			if (errno != EINTR)
				return fail(last_errno_error("Failed to lock " + display));
	}
	RunLock l;
	l.fd_ = std::move(fd);
	return l;
}

std::optional<RunLock> RunLock::wait_shared(const std::string &real_path, std::chrono::milliseconds timeout)
{
	auto fd = fs::open_regular_at(AT_FDCWD, real_path, real_path);
	if (!fd)
		return std::nullopt;
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	while (::flock(fd->get(), LOCK_SH | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() > deadline)
			return std::nullopt;
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	}
	RunLock l;
	l.fd_ = std::move(*fd);
	return l;
}

}  // namespace unbounded
