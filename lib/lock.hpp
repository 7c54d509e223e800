// The exclusive run lock (/run/unbounded-nvidia/lock): a second setup waits instead of interleaving.
// flock() is released by the kernel when the holder dies, so a kill -9 never leaves it stuck.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <functional>
#include <optional>
#include <string>

namespace unbounded {

class RunLock {
public:
	// Blocks until the lock is ours; calls on_wait once if someone else holds it.
	static Result<RunLock> acquire(const std::string &real_path, const std::string &display,
				       const std::function<void()> &on_wait = {});
	// Takes the lock only if it is free (used by read-only commands to report a run in progress).
	static Result<std::optional<RunLock>> try_acquire(const std::string &real_path, const std::string &display);

private:
	UniqueFd fd_;
};

}  // namespace unbounded
