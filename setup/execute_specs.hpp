// The executor's writing of the CDI specs (execute.hpp): ours (nvidia.yaml), the side specs and the
// /dev/char links for their nodes, from what the run's snapshot read of them (nothing is read again
// to decide whether to replace, rewrite or remove).
#pragma once

#include "cdi_state.hpp"
#include "context.hpp"
#include "driver_root.hpp"
#include "fs.hpp"
#include "report.hpp"
#include "snapshot.hpp"

#include <optional>

namespace unbounded {

// The files at cdi_spec and the side specs' paths are replaced on every run. In a CDI spec directory
// such a file is a spec by definition (whatever a hostile writer left there is overwritten); anywhere
// else it must already be a CDI spec of its kind, so that a configured `cdi_spec: /etc/passwd` cannot
// make setup replace it.
Result<void> check_spec_paths_hold_specs(const RunSnapshot &snap);

// All the specs, changed together or not at all as far as a failure can decide it (execute_specs.cpp).
Result<fs::WriteOutcome> write_spec(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi);

// The spec goes in after the root it describes; if it cannot be written, the old root goes back
// (`previous`), so root and spec never disagree because of a failed run.
Result<void> write_spec_after_swap(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi,
				   std::optional<PreviousRoot> &previous, InstallStats &stats);

}  // namespace unbounded
