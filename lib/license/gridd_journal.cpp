#include "gridd_journal.hpp"

#include "log.hpp"

#include <algorithm>
#include <memory>
#include <systemd/sd-journal.h>

namespace unbounded {
namespace {

struct JournalDeleter {
	void operator()(sd_journal *j) const { sd_journal_close(j); }
};

}  // namespace

Result<std::vector<GriddLine>> read_gridd_journal(const std::string &unit, const std::string &invocation_id,
						  const std::string &journal_dir)
{
	sd_journal *raw = nullptr;
	const int r = journal_dir.empty() ? sd_journal_open(&raw, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM)
					  : sd_journal_open_directory(&raw, journal_dir.c_str(), 0);
	if (r < 0)
		return fail(errno_error(-r, "Failed to open the journal" + (journal_dir.empty() ? std::string() : " in " + journal_dir)));
	std::unique_ptr<sd_journal, JournalDeleter> j(raw);
	sd_journal_set_data_threshold(j.get(), MAX_GRIDD_MESSAGE);
	const std::string by_unit = "_SYSTEMD_UNIT=" + unit, by_invocation = "_SYSTEMD_INVOCATION_ID=" + invocation_id;
	if (int m = sd_journal_add_match(j.get(), by_unit.c_str(), 0); m < 0)
		return fail(errno_error(-m, "Failed to match the journal on " + unit));
	if (!invocation_id.empty())
		if (int m = sd_journal_add_match(j.get(), by_invocation.c_str(), 0); m < 0)
			return fail(errno_error(-m, "Failed to match the journal on " + unit + "'s invocation"));
	std::vector<GriddLine> lines;
	if (int s = sd_journal_seek_tail(j.get()); s < 0)
		return fail(errno_error(-s, "Failed to seek the journal"));
	while (lines.size() < MAX_GRIDD_ENTRIES) {
		const int n = sd_journal_previous(j.get());
		if (n < 0)
			return fail(errno_error(-n, "Failed to read the journal for " + unit));
		if (n == 0)
			break;
		const void *data = nullptr;
		size_t len = 0;
		if (sd_journal_get_data(j.get(), "MESSAGE", &data, &len) < 0)
			continue;
		GriddLine line;
		sd_journal_get_realtime_usec(j.get(), &line.realtime_usec);
		std::string_view field(static_cast<const char *>(data), len);
		line.message = std::string(field.substr(std::min<std::size_t>(8, field.size())));  // "MESSAGE="
		const bool decides = classify_gridd_line(line.message).kind != GriddLineMeaning::Kind::Nothing;
		lines.push_back(std::move(line));
		if (decides)
			break;  // the newest that says something: nothing older changes the state
	}
	std::reverse(lines.begin(), lines.end());
	return lines;
}

GriddView observe_gridd(const Context &ctx, UnitManager &units)
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
	auto lines = read_gridd_journal(unit, st->invocation_id, dir);
	if (!lines) {
		log::debug(lines.error().message + ", license state unknown");
		return v;
	}
	v.observation = derive_license_state(*lines, true, st->active_enter_usec);
	return v;
}

}  // namespace unbounded
