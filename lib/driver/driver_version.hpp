// Driver versions: in file names ("libcuda.so.535.104.05"), in the kernel module's
// /proc/driver/nvidia/version, and their order.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace unbounded {

// "535.104.05" from "libcuda.so.535.104.05" with prefix "libcuda.so."; nullopt when the rest is not a
// driver version (two or three dot-separated numbers).
std::optional<std::string> version_suffix(std::string_view name, std::string_view prefix);
bool is_driver_version(std::string_view v);   // 2 or 3 numbers, the first of at least 3 digits
bool is_library_version(std::string_view v);  // 2 or 3 numbers ("1.1.9")
// Kernel module version from the text of /proc/driver/nvidia/version.
std::optional<std::string> parse_proc_version(std::string_view text);
// -1/0/1 comparing dotted numeric versions.
int compare_versions(std::string_view a, std::string_view b);

}  // namespace unbounded
