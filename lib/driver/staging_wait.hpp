// Step 2 of setup: wait, bounded, until the host's staging mounts and /dev/nvidiactl are there.
// A staging entry counts when it is a mount point, or a non-empty directory (fake roots in tests have
// no mounts); an empty directory that is not a mount point was left in the image and is ignored.
#pragma once

#include "staging.hpp"

#include "config.hpp"
#include "context.hpp"
#include "error.hpp"
#include "mounts.hpp"

#include <memory>
#include <string>
#include <vector>

namespace unbounded {

struct StagingState {
	bool nvidia_machine = false;               // anything NVIDIA at all: staging entries or /dev/nvidiactl
	std::vector<std::string> usable;           // staging entries that are mounts or non-empty directories
	std::vector<std::string> mounts;           // of those, the real mount points
	bool control_node = false;                 // /dev/nvidiactl is a character device
	std::shared_ptr<MountTable> mounts_table;  // as read by the probe, for the steps after the wait
	bool ready() const { return !usable.empty() && control_node; }
};

// `walked`: the refresh's settle walk (StagingWatch::trees), whose trees are looked at instead of
// listing the staging directory again.
StagingState probe_staging(const Context &ctx, const std::vector<WalkedTree> *walked = nullptr);

// Returns the state once ready; nvidia_machine=false right away on a machine with nothing NVIDIA.
Result<StagingState> wait_for_staging(const Context &ctx, Millis timeout, Millis *waited);

}  // namespace unbounded
