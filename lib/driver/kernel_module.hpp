// The loaded NVIDIA kernel module's version, from /proc/driver/nvidia/version: the authority on which
// userspace may be live. Containers talk to that module; a libcuda of another version fails with
// "driver/library version mismatch". Read afresh by every run (a path unit cannot watch /proc).
#pragma once

#include "context.hpp"

#include <optional>
#include <string>

namespace unbounded {

inline constexpr const char *PROC_DRIVER_VERSION = "/proc/driver/nvidia/version";

struct KernelModule {
	std::optional<std::string> version;  // nullopt when not readable or not understood
	std::string unknown_reason;          // why the version is unknown, for the log ("" when known)
};

KernelModule read_kernel_module(const Context &ctx);

}  // namespace unbounded
