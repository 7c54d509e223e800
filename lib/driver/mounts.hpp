// What /proc/self/mountinfo says about the staging mount points, read in constant memory and
// unescaped by libmount's rules: whether a staging directory is a real mount point (rather than an
// empty directory left in the image), the host path it was bind-mounted from (used to map the
// host's absolute symlinks into it), and its file system type.
#pragma once

#include "error.hpp"

#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace unbounded {

struct MountEntry {
	std::string target;  // mount point in our namespace
	std::string root;    // path of the mount's root inside its source file system ("/usr/lib/x86_64-linux-gnu")
	std::string fstype;
};

class MountTable {
public:
	// Only the mounts whose mount point is a direct child of `parent` (canonical) are kept, filtered
	// while the file is parsed: pod volumes are mounts in the machine, and a table of 60,000 held
	// whole cost 37 MiB on every run; the staging mount points are all that is ever asked for.
	static Result<MountTable> load(const std::string &parent, const std::string &mountinfo = "/proc/self/mountinfo");
	// Every mount whose (unescaped) mount point `keep` takes: the host tool's view of a machine's mounts.
	static Result<MountTable> load_if(const std::function<bool(const std::string &target)> &keep, const std::string &mountinfo);
	const std::vector<MountEntry> &entries() const { return entries_; }

	// Entry whose mount point is exactly `canonical_path` (see canonical()), if any.
	std::optional<MountEntry> mount_at(const std::string &canonical_path) const;
	// realpath(), or the path unchanged when it cannot be resolved. Callers canonicalise a parent
	// once and append plain directory names, instead of paying readlink() per component per lookup.
	static std::string canonical(const std::string &path);

private:
	static Result<void> scan(const std::string &mountinfo, const std::function<void(std::string_view line)> &each);
	std::vector<MountEntry> entries_;  // in the order of the file: later ones shadow earlier ones
};

}  // namespace unbounded
