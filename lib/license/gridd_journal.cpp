#include "gridd_journal.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <systemd/sd-journal.h>

namespace unbounded {
namespace {

struct JournalDeleter {
	void operator()(sd_journal *j) const { sd_journal_close(j); }
};

class SdGriddJournal final : public GriddJournalSource {
public:
	SdGriddJournal(sd_journal *j, std::string unit) : j_(j), unit_(std::move(unit)) {}

	Result<void> seek_head() override { return seek(sd_journal_seek_head(j_.get())); }
	Result<void> seek_tail() override { return seek(sd_journal_seek_tail(j_.get())); }

	Result<bool> seek_cursor(const std::string &cursor) override
	{
		// A cursor that does not parse (-EINVAL) is one the journal cannot hold: not found.
		if (int r = sd_journal_seek_cursor(j_.get(), cursor.c_str()); r == -EINVAL)
			return false;
		else if (r < 0)
			return fail(errno_error(-r, "Failed to seek the journal for " + unit_));
		// The seek lands near the cursor's place; only the entry itself, of this unit's run (the
		// matches), counts as found.
		const int n = sd_journal_next(j_.get());
		if (n < 0)
			return fail(errno_error(-n, "Failed to read the journal for " + unit_));
		return n > 0 && sd_journal_test_cursor(j_.get(), cursor.c_str()) > 0;
	}

	Result<std::optional<GriddJournalEntry>> next() override { return step(sd_journal_next(j_.get())); }
	Result<std::optional<GriddJournalEntry>> previous() override { return step(sd_journal_previous(j_.get())); }

private:
	Result<void> seek(int r)
	{
		if (r < 0)
			return fail(errno_error(-r, "Failed to seek the journal for " + unit_));
		return {};
	}

	Result<std::optional<GriddJournalEntry>> step(int n)
	{
		if (n < 0)
			return fail(errno_error(-n, "Failed to read the journal for " + unit_));
		if (n == 0)
			return std::optional<GriddJournalEntry>();
		GriddJournalEntry e;
		char *cursor = nullptr;
		if (int r = sd_journal_get_cursor(j_.get(), &cursor); r < 0)
			return fail(errno_error(-r, "Failed to read a journal cursor for " + unit_));
		e.cursor = cursor;
		::free(cursor);
		sd_journal_get_realtime_usec(j_.get(), &e.line.realtime_usec);
		const void *data = nullptr;
		size_t len = 0;
		if (sd_journal_get_data(j_.get(), "MESSAGE", &data, &len) >= 0) {  // none: an entry that says nothing
			std::string_view field(static_cast<const char *>(data), len);
			e.line.message = std::string(field.substr(std::min<std::size_t>(8, field.size())));  // "MESSAGE="
		}
		return std::optional<GriddJournalEntry>(std::move(e));
	}

	std::unique_ptr<sd_journal, JournalDeleter> j_;
	std::string unit_;
};

}  // namespace

Result<std::unique_ptr<GriddJournalSource>> open_gridd_journal(const std::string &unit, const std::string &invocation_id,
							       const std::string &journal_dir)
{
	sd_journal *raw = nullptr;
	const int r = journal_dir.empty() ? sd_journal_open(&raw, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM)
					  : sd_journal_open_directory(&raw, journal_dir.c_str(), 0);
	if (r < 0)
		return fail(errno_error(-r, "Failed to open the journal" + (journal_dir.empty() ? std::string() : " in " + journal_dir)));
	auto j = std::make_unique<SdGriddJournal>(raw, unit);
	sd_journal_set_data_threshold(raw, MAX_GRIDD_MESSAGE);
	const std::string by_unit = "_SYSTEMD_UNIT=" + unit, by_invocation = "_SYSTEMD_INVOCATION_ID=" + invocation_id;
	if (int m = sd_journal_add_match(raw, by_unit.c_str(), 0); m < 0)
		return fail(errno_error(-m, "Failed to match the journal on " + unit));
	if (!invocation_id.empty())
		if (int m = sd_journal_add_match(raw, by_invocation.c_str(), 0); m < 0)
			return fail(errno_error(-m, "Failed to match the journal on " + unit + "'s invocation"));
	return std::unique_ptr<GriddJournalSource>(std::move(j));
}

GriddView observe_gridd(const Context &ctx, UnitManager &units, const LicenseCounters &recorded)
{
	GriddView v;
	const std::string &unit = ctx.config.licensing.gridd_unit;
	auto st = units.status(unit);
	if (!st) {
		log::debug(st.error().message + ", license state unknown");
		return v;
	}
	const bool running = st->active_state == "active" || st->active_state == "reloading";
	v.invocation_id = st->invocation_id;
	if (!running || st->invocation_id.empty())
		return v;
	// Under --root (tests) the machine's persistent journal directory; else the journal itself.
	const std::string dir = ctx.root == "/" || ctx.root.empty() ? std::string() : ctx.real("/var/log/journal");
	auto journal = open_gridd_journal(unit, st->invocation_id, dir);
	if (!journal) {
		log::debug(journal.error().message + ", license state unknown");
		return v;
	}
	auto read = read_gridd_license(**journal, gridd_journal_memo(recorded, st->invocation_id), st->active_enter_usec);
	if (!read) {
		log::debug(read.error().message + ", license state unknown");
		return v;
	}
	if (!read->complete)
		log::debug("nvidia-gridd logged more than " + std::to_string(MAX_GRIDD_ENTRIES) +
			   " entries since the last look: its license state is as of an older entry, the next run reads on");
	v.observation = read->observation;
	v.journal_cursor = read->cursor;
	return v;
}

}  // namespace unbounded
