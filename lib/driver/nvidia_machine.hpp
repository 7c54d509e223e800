// One definition of "this is an NVIDIA machine", shared by the generator (emit the setup
// unit and containerd's ordering, or nothing) and setup (wait for the staging mounts, or say there is
// nothing to do): an entry of the staging parent that is not a dot-entry, or /dev/nvidiactl in any
// form. Dot-entries are nobody's staging tree: a ".keep" an image ships, or an editor's or a copy
// tool's temp file, must not make a CPU node's containerd wait for a driver. Header-only: the
// generator links no driver code.
#pragma once

#include "fs.hpp"

#include <algorithm>
#include <string>
#include <string_view>

namespace unbounded {

// A name in the staging parent that may be a staging tree: "0", "1", a host's own name; not ".keep".
inline bool is_staging_entry(std::string_view name) { return !name.empty() && name.front() != '.'; }

// Whether the staging parent open at `parent_fd` has any staging entry (mounted or not, empty or not:
// a mount point the host has yet to fill is the machine's GPU-to-be).
inline bool has_staging_entry(int parent_fd, const std::string &display)
{
	auto names = fs::list_dir(parent_fd, display, /*sorted=*/false);
	return names && std::any_of(names->begin(), names->end(), [](const std::string &n) { return is_staging_entry(n); });
}

}  // namespace unbounded
