// nvidia-gridd's journal since its current start: the entries of its unit with its invocation ID,
// read with sd-journal behind a small interface (tests use a fake) and bounded (entries per run and
// bytes per message), so a daemon that logs in a loop costs the reloader a fixed amount. What was
// derived is remembered with the journal cursor it was derived up to (the state file), and the next
// run reads only what is newer: the newest message that says something decides, however far back.
#pragma once

#include "context.hpp"
#include "error.hpp"
#include "license_metrics.hpp"
#include "license_state.hpp"
#include "unit_manager.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// The most entries one pass reads (a run makes at most two): the state is decided by the newest
// entry that says something, near the end on any healthy daemon.
inline constexpr std::size_t MAX_GRIDD_ENTRIES = 5000;
// A MESSAGE longer than this is cut (sd_journal_set_data_threshold): gridd's lines are ~150 bytes.
inline constexpr std::size_t MAX_GRIDD_MESSAGE = 2048;

struct GriddJournalEntry {
	std::string cursor;
	GriddLine line;
};

// One unit's entries of one run, walked like sd-journal: seek_tail then previous() gives the newest,
// seek_head then next() the oldest; after a seek_cursor() that found its entry, next() gives the one
// after it.
class GriddJournalSource {
public:
	virtual ~GriddJournalSource() = default;
	virtual Result<void> seek_head() = 0;
	virtual Result<void> seek_tail() = 0;
	// false when the journal no longer holds that entry of this run (rotated, vacuumed, another run's).
	virtual Result<bool> seek_cursor(const std::string &cursor) = 0;
	virtual Result<std::optional<GriddJournalEntry>> next() = 0;
	virtual Result<std::optional<GriddJournalEntry>> previous() = 0;
};

// `journal_dir` empty: the machine's journal (local, system); else that directory (tests under
// --root). Fails when no journal can be opened.
Result<std::unique_ptr<GriddJournalSource>> open_gridd_journal(const std::string &unit, const std::string &invocation_id,
							       const std::string &journal_dir);

// What an earlier run derived from this run's entries up to and including `cursor`.
struct GriddJournalMemo {
	std::string cursor;
	LicenseObservation derived;
};

struct GriddJournalRead {
	LicenseObservation observation;
	std::string cursor;       // derived up to here: the next run's memo ("" when the run logged nothing)
	std::size_t entries = 0;  // entries read, both passes
	bool complete = true;     // false: the cap stopped the catch-up; the next run goes on from `cursor`
};

// Back from the newest to the first entry that decides, the memo's entry, or the run's first entry;
// when `cap` entries are not enough, forward from the memo's entry (or the run's first) to where the
// first pass stopped, at most `cap` again.
Result<GriddJournalRead> read_gridd_license(GriddJournalSource &journal, const std::optional<GriddJournalMemo> &memo,
					    std::uint64_t started_usec, std::size_t cap = MAX_GRIDD_ENTRIES);

// The memo `recorded` (the state file) holds for the run `invocation_id`: none when it is of another
// run (another boot, another start of nvidia-gridd) or has no cursor.
std::optional<GriddJournalMemo> gridd_journal_memo(const LicenseCounters &recorded, const std::string &invocation_id);

// One look at nvidia-gridd: its unit's state and run (the bus), then that run's journal, from where
// `recorded` (the state file) left it when it is of the same run. Anything that cannot be read makes
// the state unknown, never an error: this only observes.
GriddView observe_gridd(const Context &ctx, UnitManager &units, const LicenseCounters &recorded);

}  // namespace unbounded
