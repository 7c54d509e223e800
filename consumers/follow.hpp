// The consumers' helper's one job: after a new driver root generation (lib/consumer/driver_generation.hpp),
// restart the containers of the consumers that predate it, once, and wait for them to run again.
#pragma once

#include "context.hpp"
#include "runtime.hpp"

#include <functional>

namespace unbounded {

struct FollowSeams {
	std::function<void(Millis)> sleep;
};

// The CRI socket to ask: consumers.runtime_endpoint, else the first of containerd's and CRI-O's that
// exists (under --root, in the tree). "" when there is none.
std::string runtime_socket(const Context &ctx);

// Restarts what predates the current generation, records consumers.json and the metrics. `runtime`
// null: none could be reached, `unreachable` says why (a warning, nothing restarted). Returns the exit
// status: 0 when every consumer is back (or there was nothing to do), 1 when one is not.
int follow_consumers(const Context &ctx, int run_dir, Runtime *runtime, const std::string &socket, const std::string &unreachable,
		     const FollowSeams &seams);

}  // namespace unbounded
