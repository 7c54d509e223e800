// The one path resolver: a path walked one component at a time below a directory fd, every symlink
// read and resolved by us (O_NOFOLLOW on each step), the way systemd's chase() does it. The flags
// say what the walk may do; the walkers of the project (open_confined's fallback for openat2, the
// staging trees' resolver and their suffix probe) are this function with different flags.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sys/stat.h>

namespace unbounded {

enum class Chase : unsigned {
	InRoot = 0,            // as if the root were "/": ".." stops at it, an absolute symlink starts at it
	Beneath = 1u << 0,     // ".." above the root or an absolute symlink fails with EXDEV (RESOLVE_BENEATH)
	NoSymlinks = 1u << 1,  // any symlink to follow fails with ELOOP (RESOLVE_NO_SYMLINKS)
	NoFollow = 1u << 2,    // the last component is taken as it is, a symlink too (O_NOFOLLOW)
	OpenLast = 1u << 4,    // also open the last component (O_PATH), for a caller that needs that very inode
};
constexpr Chase operator|(Chase a, Chase b) { return static_cast<Chase>(static_cast<unsigned>(a) | static_cast<unsigned>(b)); }
constexpr bool has(Chase set, Chase flag) { return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0; }

inline constexpr unsigned CHASE_MAX_SYMLINKS = 40;  // what the kernel allows (ELOOP beyond)

// Where a symlink's target sends the walk instead of the usual rule: the rest of the path is then
// walked from `root` (which the walk duplicates) and `rel` in it.
struct ChaseJump {
	int root = -1;
	std::string rel;
};

struct ChaseHow {
	Chase flags = Chase::InRoot;
	// A budget shared by several walks of one untrusted input: each component taken (a symlink's
	// target's components included) costs one; spent, the walk fails with ETIMEDOUT.
	std::uint64_t *steps = nullptr;
	// Called for each symlink about to be followed, with the link's canonical path from the root
	// the walk is in and its target. nullopt: the target is followed by the flags' rules; a jump
	// moves the walk to another root (the staging trees map a host path onto the tree holding it).
	std::function<Result<std::optional<ChaseJump>>(const std::string &link, const std::string &target)> on_symlink;
};

struct Chased {
	UniqueFd dir;           // O_PATH of the directory holding the last component (the end, when `name` is empty)
	std::string name;       // the last component; "" when the path ends at a directory by "", "." or ".."
	std::string rel;        // the canonical path from the root the walk ended in, "" for that root
	struct stat st = {};    // lstat of the last component (of `dir` when `name` is empty)
	UniqueFd fd;            // with OpenLast: O_PATH|O_NOFOLLOW of the last component itself
	unsigned symlinks = 0;  // symlinks followed
};

enum class ChaseStep {
	Walk,      // opening or stat-ing a component failed (ENOENT, EACCES, EMFILE, ...)
	NotDir,    // a component before the last is neither a directory nor a symlink (ENOTDIR)
	ReadLink,  // readlinkat of a symlink failed
	Loop,      // more than CHASE_MAX_SYMLINKS symlinks, or a symlink under NoSymlinks (ELOOP)
	Escape,    // ".." above the root or an absolute symlink under Beneath (EXDEV)
	Budget,    // the steps budget is spent (ETIMEDOUT)
	Hook,      // on_symlink failed: `error` is its error
};

struct ChaseError {
	ChaseStep step = ChaseStep::Walk;
	int errnum = 0;
	std::string at;         // canonical path from the root of the component that failed ("lib/libcuda.so.1")
	unsigned symlinks = 0;  // symlinks followed before the failure
	Error error;            // "Failed to resolve PATH: %m", or on_symlink's own error
};

// Walks `path` (relative to `root`; leading '/' ignored) by `how`. The root must be a directory fd.
std::expected<Chased, ChaseError> chase(int root, std::string_view path, const ChaseHow &how = {});

}  // namespace unbounded
