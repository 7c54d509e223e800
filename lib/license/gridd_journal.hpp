// nvidia-gridd's journal since its current start: the entries of its unit with its invocation ID,
// newest first, read with sd-journal and bounded (entries and bytes per message), so a daemon that
// logs in a loop costs the reloader a fixed amount.
#pragma once

#include "context.hpp"
#include "error.hpp"
#include "license_metrics.hpp"
#include "license_state.hpp"
#include "unit_manager.hpp"

#include <string>
#include <vector>

namespace unbounded {

// The most entries read back from the newest; the state is decided by the newest one that says
// something, which is near the end on any healthy daemon.
inline constexpr std::size_t MAX_GRIDD_ENTRIES = 5000;
// A MESSAGE longer than this is cut (sd_journal_set_data_threshold): gridd's lines are ~150 bytes.
inline constexpr std::size_t MAX_GRIDD_MESSAGE = 2048;

// Oldest first, at most MAX_GRIDD_ENTRIES, stopping early at the first (newest) entry that decides
// the state. `journal_dir` empty: the machine's journal (local, system); else that directory (tests
// under --root). Fails when no journal can be opened.
Result<std::vector<GriddLine>> read_gridd_journal(const std::string &unit, const std::string &invocation_id,
						  const std::string &journal_dir);

// One look at nvidia-gridd: its unit's state and run (the bus), then that run's journal. Anything that
// cannot be read makes the state unknown, never an error: this only observes.
GriddView observe_gridd(const Context &ctx, UnitManager &units);

}  // namespace unbounded
