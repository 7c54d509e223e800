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

	// Entry whose mount point is exactly `canonical_path` (see canonical()), if any.
	std::optional<MountEntry> mount_at(const std::string &canonical_path) const;
	// realpath(), or the path unchanged when it cannot be resolved. Callers canonicalise a parent
	// once and append plain directory names, instead of paying readlink() per component per lookup.
	static std::string canonical(const std::string &path);

private:
	struct Deleter {
		void operator()(libmnt_table *t) const;
	};
	std::unique_ptr<libmnt_table, Deleter> table_;
};

}  // namespace unbounded
