// One run of setup or refresh under the lock, shared by both commands (setup_command.cpp).
#pragma once

#include "context.hpp"
#include "report.hpp"

namespace unbounded {

enum class Mode {
	Setup,
	Refresh,
};

// Lock, (wait for staging,) snapshot, discover, decide, build or keep, write the spec, check it.
// `run_dir` is the open run directory. Returns the exit code.
int apply(const Context &ctx, Report &report, Mode mode, int run_dir);

}  // namespace unbounded
