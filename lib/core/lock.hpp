// The exclusive run lock (/run/unbounded-nvidia/lock): a second setup waits instead of interleaving.
// flock() is released by the kernel when the holder dies, so a kill -9 never leaves it stuck.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace unbounded {

class RunLock {
public:
	enum class Holder {
		Writer,
		Readers,
	};
	// Blocks until the lock `name` in the (trusted) directory `dirfd` is ours; calls on_wait once if
	// someone holds it, saying whether that is another writer (setup) or only readers (verify), so
	// "another setup is running" is said only when it is true. The lock file must be a regular file
	// that only we could have made (a planted FIFO or symlink is refused, never opened blocking).
	static Result<RunLock> acquire(int dirfd, const std::string &name, const std::string &display,
				       const std::function<void(Holder)> &on_wait = {});
	// For read-only commands: a shared lock, which waits (at most `timeout`) while a run holds the lock.
	// Nothing is created: without a lock file no run has happened, and nothing is returned.
	static std::optional<RunLock> wait_shared(const std::string &real_path, std::chrono::milliseconds timeout);

private:
	UniqueFd fd_;
};

}  // namespace unbounded
