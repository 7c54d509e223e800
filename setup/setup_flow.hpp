// One run of setup or refresh under the lock, shared by both commands (setup_command.cpp).
#pragma once

#include "context.hpp"
#include "report.hpp"
#include "staging.hpp"

#include <vector>

namespace unbounded {

enum class Mode {
	Setup,
	Refresh,
};

// Lock, (wait for staging,) snapshot, discover, decide, build or keep, write the spec, check it.
// `run_dir` is the open run directory; `walked` the refresh's settle walk, which discovery reads
// through (StagingWatch::trees). Returns the exit code.
int apply(const Context &ctx, Report &report, Mode mode, int run_dir, const std::vector<WalkedTree> *walked = nullptr);

}  // namespace unbounded
