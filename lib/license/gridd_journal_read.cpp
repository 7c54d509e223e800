// Reading nvidia-gridd's license state from a journal source, bounded and from where the last run
// left it (gridd_journal.hpp). No sd-journal here: the unit tests drive it with a fake source.
#include "gridd_journal.hpp"

namespace unbounded {
namespace {

// What ends the look back: an acquisition or a loss. A failed renewal needs what came before it.
bool decides(const GriddLine &line)
{
	const auto kind = classify_gridd_line(line.message).kind;
	return kind == GriddLineMeaning::Kind::Acquired || kind == GriddLineMeaning::Kind::NotLicensed;
}

// Pass 2, oldest first, from what the memo covers (its entry may be gone: rotated or vacuumed) or
// from the run's first entry, up to where pass 1 stopped (`oldest_read`). Returns the cursor of the
// last entry taken when the cap ran out first, nullopt when it got there.
Result<std::optional<std::string>> read_forward(GriddJournalSource &journal, const std::optional<GriddJournalMemo> &memo,
						std::size_t cap, const std::string &oldest_read, LicenseObservation &o,
						GriddJournalRead &r)
{
	auto resumed = memo ? journal.seek_cursor(memo->cursor) : Result<bool>(false);
	if (!resumed)
		return fail(resumed.error());
	// A memo whose entry is gone still holds: the journal drops its oldest entries first, so all
	// that is left is newer than what the memo covered.
	if (memo)
		o = memo->derived;
	if (!*resumed)
		if (auto s = journal.seek_head(); !s)
			return fail(s.error());
	std::string last = *resumed ? memo->cursor : std::string();
	for (std::size_t n = 0; n < cap; n++) {
		auto e = journal.next();
		if (!e)
			return fail(e.error());
		if (!*e || (*e)->cursor == oldest_read)
			return std::optional<std::string>();
		r.entries++;
		take_gridd_line(o, (*e)->line);
		last = (*e)->cursor;
	}
	return std::optional<std::string>(std::move(last));
}

}  // namespace

Result<GriddJournalRead> read_gridd_license(GriddJournalSource &journal, const std::optional<GriddJournalMemo> &memo,
					    std::uint64_t started_usec, std::size_t cap)
{
	GriddJournalRead r;
	LicenseObservation pending;
	pending.state = LicenseState::Pending;
	pending.since_usec = started_usec;
	LicenseObservation o = pending;

	// Pass 1, newest first: stop at what decides, at what the memo already covers, or at the start.
	if (auto s = journal.seek_tail(); !s)
		return fail(s.error());
	std::string newest, oldest_read;
	// The newest failed renewal newer than where pass 1 stopped: after a failed renewal, the next
	// one decides the same way (take_gridd_line), so the newest is all that counts.
	std::optional<GriddLine> renewal;
	bool covered = false;
	for (std::size_t n = 0; n < cap && !covered; n++) {
		auto e = journal.previous();
		if (!e)
			return fail(e.error());
		if (!*e) {
			// The run's oldest entry read: nothing decided since the start (pending), or since what
			// the memo covered when its entry was vacuumed (the oldest go first).
			if (memo)
				o = memo->derived;
			covered = true;
			break;
		}
		r.entries++;
		if (newest.empty())
			newest = (*e)->cursor;
		if (memo && (*e)->cursor == memo->cursor) {
			o = memo->derived;
			covered = true;
		} else if (decides((*e)->line)) {
			take_gridd_line(o, (*e)->line);
			covered = true;
		} else {
			oldest_read = (*e)->cursor;
			if (!renewal && classify_gridd_line((*e)->line.message).kind == GriddLineMeaning::Kind::RenewalFailed)
				renewal = std::move((*e)->line);
		}
	}
	if (!covered) {
		auto behind = read_forward(journal, memo, cap, oldest_read, o, r);
		if (!behind)
			return fail(behind.error());
		if (*behind) {
			// Still behind: the state as of the last entry read, the rest on the next run.
			r.complete = false;
			r.observation = o;
			r.cursor = std::move(**behind);
			return r;
		}
	}
	if (renewal)
		take_gridd_line(o, *renewal);
	r.observation = o;
	r.cursor = newest.empty() && memo ? memo->cursor : newest;
	return r;
}

std::optional<GriddJournalMemo> gridd_journal_memo(const LicenseCounters &recorded, const std::string &invocation_id)
{
	// Only a memo of this very run: another boot or another start of nvidia-gridd has another
	// invocation ID, and its entries say nothing of this run.
	if (recorded.journal_cursor.empty() || invocation_id.empty() || recorded.license_invocation != invocation_id ||
	    recorded.license == LicenseState::Unknown)
		return std::nullopt;
	GriddJournalMemo memo{recorded.journal_cursor, {}};
	memo.derived.state = recorded.license;
	// A recorded expiry is of a license the journal granted; the clock, not the journal, ended it
	// when the state reads unlicensed (judge_license_expiry).
	if (recorded.license_expiry > 0 && recorded.license != LicenseState::Pending) {
		memo.derived.state = LicenseState::Licensed;
		memo.derived.expiry = static_cast<std::int64_t>(recorded.license_expiry);
	}
	memo.derived.since_usec = static_cast<std::uint64_t>(recorded.license_since) * 1'000'000;
	return memo;
}

}  // namespace unbounded
