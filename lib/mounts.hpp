// What /proc/self/mountinfo says about a path, through libmount: whether a staging directory is a real
// mount point (rather than an empty directory left in the image), the host path it was bind-mounted
// from (used to map the host's absolute symlinks into it), and the file system a path lives on.
#pragma once

#include "error.hpp"

#include <memory>
#include <optional>
#include <string>

struct libmnt_table;

namespace unbounded {

struct MountEntry {
	std::string target;   // mount point in our namespace
	std::string root;     // path of the mount's root inside its source file system ("/usr/lib/x86_64-linux-gnu")
	std::string fstype;
};

class MountTable {
public:
	static Result<MountTable> load(const std::string &mountinfo = "/proc/self/mountinfo");

	// Entry whose mount point is exactly `path` (canonicalised), if any.
	std::optional<MountEntry> mount_at(const std::string &path) const;
	// Entry of the file system that holds `path` (longest matching mount point).
	std::optional<MountEntry> mount_of(const std::string &path) const;

private:
	struct Deleter {
		void operator()(libmnt_table *t) const;
	};
	std::unique_ptr<libmnt_table, Deleter> table_;
};

}  // namespace unbounded
