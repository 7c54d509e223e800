// Opening a path with every symlink resolved inside a directory: openat2(2) with RESOLVE_IN_ROOT or
// RESOLVE_BENEATH where the kernel offers it, and the same walk in user space where it does not.
// openat2 is missing before Linux 5.6, and systemd's RestrictSUIDSGID= makes it fail with ENOSYS
// (seccomp cannot look into struct open_how), which is how our own sandboxed units run.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <cstdint>
#include <fcntl.h>
#include <string_view>

namespace unbounded {

enum class Confinement {
	InRoot,   // as if `root` were "/": absolute symlinks start at it, ".." stops at it (RESOLVE_IN_ROOT)
	Beneath,  // an absolute symlink or a ".." above `root` is refused with EXDEV (RESOLVE_BENEATH)
};

struct ConfinedOpen {
	Confinement confinement = Confinement::InRoot;
	int flags = O_PATH;       // for the final component; O_CLOEXEC is always added
	bool follow_last = true;  // false: the final component is opened itself, even a symlink
	// A budget shared by several opens of one untrusted input: each path component the user-space
	// walk takes (a symlink's target's components included) costs one, an openat2 call one;
	// spent, the open fails with ETIMEDOUT. 40 symlinks of 4 KiB each are ~80,000 components.
	std::uint64_t *steps = nullptr;
};

// Opens `path` (relative to `root`; a leading '/' is ignored) and returns the fd, or the errno of
// the failure (ENOENT, ELOOP after 40 symlinks, EXDEV for an escape under Beneath, ETIMEDOUT when
// the steps budget is spent, ...).
Result<UniqueFd> open_confined(int root, std::string_view path, const ConfinedOpen &how);

namespace testing {
// Tests: skip openat2 and always walk in user space (the fallback must give the same answers).
void force_user_space_walk(bool on);
}  // namespace testing

}  // namespace unbounded
