// The first line of every CDI spec we write. Package removal, the non-GPU cleanup and setup itself
// touch only files that start with it: a spec someone else wrote is never ours to remove. A YAML
// comment, which CDI parsers ignore.
#pragma once

#include "error.hpp"

#include <string>
#include <string_view>

namespace unbounded {

inline constexpr std::string_view SPEC_MARKER = "# Written by unbounded-nvidia-setup ";

// "# Written by unbounded-nvidia-setup 0.1.0; removed with it, do not edit\n"
std::string spec_marker_line();

// Whether a spec's text starts with the marker (of any version).
bool is_our_spec(std::string_view text);

// Whether the file at `real_path` is a regular file that starts with the marker. Never blocks (a
// FIFO is not ours), never follows a symlink at the last component, reads only the first line.
bool file_is_our_spec(const std::string &real_path);

// Removes `real_path` when it is a spec of ours; a file of anyone else is left alone. Returns
// whether it removed it. `display` names it in errors.
Result<bool> remove_our_spec(const std::string &real_path, const std::string &display);

}  // namespace unbounded
