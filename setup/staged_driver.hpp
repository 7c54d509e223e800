// Step 3 of setup and refresh, and verify's look at what the host has staged: the staging trees
// opened and the driver discovered in them, through the discovery memo of the run directory.
#pragma once

#include "context.hpp"
#include "discovery_cache.hpp"
#include "driver_discovery.hpp"
#include "staging_wait.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct StagedDriver {
	std::optional<DriverSet> driver;    // nullopt when staging holds no consistent driver
	Error error;                        // why not
	std::vector<std::string> warnings;  // memo rejected, ...
	std::size_t cache_hits = 0;
	std::optional<DiscoveryCache> memo;  // when `keep_memo`: what to save for the next run (execute.hpp)
};

// `run_dir` is the run directory (-1: no memo). Writes nothing: with `keep_memo` the memo, with what
// this discovery added to it, is handed back for the executor to save. `walked`: the refresh's
// settle walk (Staging::from_walk), when it kept its directories.
StagedDriver discover_staged(const Context &ctx, const StagingState &state, int run_dir,
			     const std::optional<std::string> &kernel_version, bool keep_memo,
			     const std::vector<WalkedTree> *walked = nullptr);

}  // namespace unbounded
