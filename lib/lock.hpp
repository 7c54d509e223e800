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
	// Blocks until the lock is ours; calls on_wait once if someone else holds it.
	static Result<RunLock> acquire(const std::string &real_path, const std::string &display,
				       const std::function<void()> &on_wait = {});
	// For read-only commands: a shared lock, which waits (at most `timeout`) while a run holds the lock.
	// Nothing is created: without a lock file no run has happened, and nothing is returned.
	static std::optional<RunLock> wait_shared(const std::string &real_path, std::chrono::milliseconds timeout);

private:
	UniqueFd fd_;
};

}  // namespace unbounded
