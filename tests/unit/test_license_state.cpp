// Issue 28: whether nvidia-gridd holds a license, derived from its journal lines (written from the
// messages NVIDIA's Client Licensing User Guide and field reports show, in each wording), and what
// the reloader keeps and publishes of it.
#include "fs.hpp"
#include "gridd_journal.hpp"
#include "license_metrics.hpp"
#include "license_state.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace unbounded;

namespace {

using Kind = GriddLineMeaning::Kind;

std::vector<GriddLine> lines(std::initializer_list<const char *> messages)
{
	std::vector<GriddLine> out;
	std::uint64_t t = 1'796'140'800'000'000;  // 2026-12-01 16:00:00 UTC
	for (const char *m : messages)
		out.push_back(GriddLine{t += 1'000'000, m});
	return out;
}

// The state from nvidia-gridd's messages of its current run, oldest first, as the reloader takes
// them (take_gridd_line): the newest message that says something decides. `running` false: Unknown.
LicenseObservation derive_license_state(const std::vector<GriddLine> &lines, bool running, std::uint64_t started_usec)
{
	LicenseObservation o;
	if (!running)
		return o;
	o.state = LicenseState::Pending;
	o.since_usec = started_usec;
	for (const auto &line : lines)
		take_gridd_line(o, line);
	return o;
}

// nvidia-gridd's journal of one run, walked as sd-journal walks it, counting the entries it hands out.
class FakeGriddJournal final : public GriddJournalSource {
public:
	std::vector<GriddJournalEntry> entries;  // oldest first
	std::size_t handed = 0;

	void log(const std::string &message)
	{
		const std::size_t n = serial_++;
		entries.push_back({"s=0;i=" + std::to_string(n), {1'796'140'800'000'000 + n * 1'000'000, message}});
	}
	void log_many(std::size_t n, const std::string &message)
	{
		for (std::size_t i = 0; i < n; i++)
			log(message);
	}
	void vacuum(std::size_t oldest) { entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(oldest)); }

	Result<void> seek_head() override
	{
		pos_ = -1;
		return {};
	}
	Result<void> seek_tail() override
	{
		pos_ = static_cast<std::ptrdiff_t>(entries.size());
		return {};
	}
	Result<bool> seek_cursor(const std::string &cursor) override
	{
		for (std::size_t i = 0; i < entries.size(); i++)
			if (entries[i].cursor == cursor) {
				pos_ = static_cast<std::ptrdiff_t>(i);
				return true;
			}
		return false;
	}
	Result<std::optional<GriddJournalEntry>> next() override
	{
		if (pos_ + 1 >= static_cast<std::ptrdiff_t>(entries.size())) {
			pos_ = static_cast<std::ptrdiff_t>(entries.size());
			return std::optional<GriddJournalEntry>();
		}
		handed++;
		return std::optional<GriddJournalEntry>(entries[static_cast<std::size_t>(++pos_)]);
	}
	Result<std::optional<GriddJournalEntry>> previous() override
	{
		if (pos_ <= 0) {
			pos_ = -1;
			return std::optional<GriddJournalEntry>();
		}
		handed++;
		return std::optional<GriddJournalEntry>(entries[static_cast<std::size_t>(--pos_)]);
	}

private:
	std::ptrdiff_t pos_ = -1;
	std::size_t serial_ = 0;
};

constexpr std::uint64_t STARTED = 1'796'140'700'000'000;
const char *const ACQUIRED = "License acquired successfully. (Info: s, p; Expiry: 2026-12-2 16:0:0 GMT)";
const char *const NOISE = "Calling load_byte_array(tra)";

// One reloader run's look: the memo from the record, the read, the record updated.
GriddJournalRead look(FakeGriddJournal &j, LicenseCounters &c, const std::string &invocation, double now = 1'796'141'000)
{
	auto read = read_gridd_license(j, gridd_journal_memo(c, invocation), STARTED);
	REQUIRE(read);
	apply_license_view(c, GriddView{invocation, read->observation, read->cursor}, now);
	return *read;
}

const std::string RUN_A = std::string(31, '0') + "a", RUN_B = std::string(31, '0') + "b";

}  // namespace

TEST_CASE("a license acquired 5,000 lines ago is still licensed; the next run reads only what is newer", "[license-state]")
{
	FakeGriddJournal j;
	j.log("Started (1976)");
	j.log(ACQUIRED);
	j.log_many(MAX_GRIDD_ENTRIES + 1, NOISE);  // more than one pass may read
	LicenseCounters c;
	auto read = look(j, c, RUN_A);
	CHECK(read.complete);
	CHECK(c.license == LicenseState::Licensed);
	CHECK(c.license_expiry == 1796227200);
	CHECK(c.license_since == 1'796'140'801);  // the acquisition's time, not nvidia-gridd's start
	CHECK(read.entries <= 2 * MAX_GRIDD_ENTRIES);
	CHECK(c.journal_cursor == j.entries.back().cursor);
	CHECK(c.license_invocation == RUN_A);

	// The record survives the state file; the next run reads the new entries and the memo's own.
	c = LicenseCounters::parse(c.serialize());
	CHECK(c.journal_cursor == j.entries.back().cursor);
	j.log_many(10, NOISE);
	j.handed = 0;
	read = look(j, c, RUN_A);
	CHECK(j.handed == 11);
	CHECK(c.license == LicenseState::Licensed);
	CHECK(c.license_expiry == 1796227200);

	// What is newer decides.
	j.log("Failed to acquire license from 10.31.20.45");
	j.log_many(3, NOISE);
	j.handed = 0;
	look(j, c, RUN_A);
	CHECK(j.handed == 4);
	CHECK(c.license == LicenseState::Unlicensed);
}

TEST_CASE("a cursor of another run, one the journal lost, or a damaged one is not trusted", "[license-state]")
{
	FakeGriddJournal j;
	j.log(ACQUIRED);
	j.log_many(20, NOISE);
	LicenseCounters c;
	look(j, c, RUN_A);
	REQUIRE(c.license == LicenseState::Licensed);
	// Another run of nvidia-gridd (or another boot): its memo says nothing of this run.
	CHECK_FALSE(gridd_journal_memo(c, RUN_B));
	CHECK_FALSE(gridd_journal_memo(c, ""));
	CHECK(gridd_journal_memo(c, RUN_A));
	FakeGriddJournal b;  // run B's entries: it has said nothing yet
	b.log_many(3, NOISE);
	look(b, c, RUN_B);
	CHECK(c.license == LicenseState::Pending);
	CHECK(c.license_since == STARTED / 1'000'000);

	// The memo's entry vacuumed: what is left is newer than what the memo covered, and is read.
	FakeGriddJournal v;
	v.log(ACQUIRED);
	v.log_many(MAX_GRIDD_ENTRIES + 10, NOISE);
	LicenseCounters cv;
	look(v, cv, RUN_A);
	REQUIRE(cv.license == LicenseState::Licensed);
	v.log_many(MAX_GRIDD_ENTRIES + 10, NOISE);
	v.vacuum(MAX_GRIDD_ENTRIES + 100);
	auto read = look(v, cv, RUN_A);
	CHECK(read.complete);
	CHECK(cv.license == LicenseState::Licensed);
	v.log("License returned successfully.");
	v.vacuum(v.entries.size() - 1);
	look(v, cv, RUN_A);
	CHECK(cv.license == LicenseState::Unlicensed);

	// The state file is ours, but read as damage-prone as any other.
	for (const char *bad : {"journal_cursor s=0;i=1\x1b[2J\n", "journal_cursor ../../etc/shadow\n", "journal_cursor \n",
				"license_invocation 123\n", "license_invocation ../../../../../../../../../../etc\n"}) {
		const LicenseCounters p = LicenseCounters::parse(bad);
		CHECK(p.journal_cursor.empty());
		CHECK(p.license_invocation.empty());
	}
	CHECK(LicenseCounters::parse("journal_cursor " + std::string(600, 'a') + "\n").journal_cursor.empty());
	CHECK(LicenseCounters::parse("journal_cursor s=ab;i=1f;b=00;m=2;t=5;x=9\n").journal_cursor == "s=ab;i=1f;b=00;m=2;t=5;x=9");
}

TEST_CASE("a journal past two passes' worth is caught up over runs, each bounded", "[license-state]")
{
	FakeGriddJournal j;
	j.log(ACQUIRED);
	j.log_many(3 * MAX_GRIDD_ENTRIES, NOISE);
	LicenseCounters c;
	auto read = look(j, c, RUN_A);
	CHECK_FALSE(read.complete);
	CHECK(read.entries <= 2 * MAX_GRIDD_ENTRIES);
	CHECK(c.license == LicenseState::Licensed);  // as of the entry it read up to
	int runs = 1;
	while (!read.complete && runs < 4) {
		read = look(j, c, RUN_A);
		runs++;
		CHECK(read.entries <= 2 * MAX_GRIDD_ENTRIES);
		CHECK(c.license == LicenseState::Licensed);
	}
	CHECK(read.complete);
	CHECK(runs == 3);  // each run's second pass goes on by a pass's worth
	CHECK(c.journal_cursor == j.entries.back().cursor);
}

TEST_CASE("a new run of nvidia-gridd that is pending starts a new pending period", "[license-state]")
{
	LicenseCounters c;
	GriddView v{RUN_A, {LicenseState::Pending, std::nullopt, 1'796'140'100'000'000}, ""};
	apply_license_view(c, v, 1'796'140'200);
	CHECK(c.license_since == 1'796'140'100);
	v.observation.since_usec = 1'796'140'150'000'000;  // same run, later look: the start is kept
	CHECK_FALSE(apply_license_view(c, v, 1'796'140'300));
	CHECK(c.license_since == 1'796'140'100);
	v = GriddView{RUN_B, {LicenseState::Pending, std::nullopt, 1'796'140'900'000'000}, ""};  // restarted
	apply_license_view(c, v, 1'796'141'000);
	CHECK(c.license == LicenseState::Pending);
	CHECK(c.license_since == 1'796'140'900);
}

TEST_CASE("past its expiry a license is not held, in the record, the metrics and the journal's change", "[license-state]")
{
	const std::int64_t expiry = 1796227200;  // 2026-12-02 16:00:00 UTC
	LicenseCounters c;
	GriddView v{RUN_A, {LicenseState::Licensed, expiry, 1'796'140'800'000'000}, "s=0;i=1"};
	CHECK(apply_license_view(c, v, expiry - 3600));
	CHECK(c.license == LicenseState::Licensed);
	// Within the margin: still licensed, no change.
	CHECK_FALSE(apply_license_view(c, v, expiry + LICENSE_EXPIRY_MARGIN_S - 1));
	CHECK(c.license == LicenseState::Licensed);
	// Past it: a change to unlicensed, since the expiry, the expiry kept as its cause.
	auto before = apply_license_view(c, v, expiry + 600);
	REQUIRE(before);
	CHECK(*before == LicenseState::Licensed);
	CHECK(c.license == LicenseState::Unlicensed);
	CHECK(c.license_since == expiry);
	CHECK(c.license_expiry == expiry);
	const std::string text = license_metrics_text(c, expiry + 600);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"unlicensed\"} 1\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"licensed\"} 0\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_expiry_timestamp_seconds") == std::string::npos);
	// The next look: no second change; a renewal makes it licensed again, until the new expiry.
	CHECK_FALSE(apply_license_view(c, v, expiry + 900));
	v.observation = {LicenseState::Licensed, expiry + 86400, static_cast<std::uint64_t>(expiry + 1000) * 1'000'000};
	before = apply_license_view(c, v, expiry + 1000);
	REQUIRE(before);
	CHECK(c.license == LicenseState::Licensed);
	CHECK(c.license_expiry == expiry + 86400);
	// The record judged alone, as --npd does.
	LicenseCounters r = LicenseCounters::parse("license licensed\nlicense_since 100\nlicense_expiry 1000\n");
	CHECK_FALSE(judge_license_expiry(r, 1000 + LICENSE_EXPIRY_MARGIN_S));
	CHECK(judge_license_expiry(r, 1000 + LICENSE_EXPIRY_MARGIN_S + 1));
	CHECK(r.license == LicenseState::Unlicensed);
	CHECK(r.license_since == 1000);
}

TEST_CASE("a failed renewal keeps a lease with a known expiry and ends any other", "[license-state]")
{
	for (const char *m : {"Failed to renew license from 10.31.20.45", "License renewal failed", "Unable to renew license"})
		CHECK(classify_gridd_line(m).kind == Kind::RenewalFailed);
	auto o = derive_license_state(lines({ACQUIRED, "Failed to renew license from s"}), true, STARTED);
	CHECK(o.state == LicenseState::Licensed);
	CHECK(o.expiry == std::optional<std::int64_t>(1796227200));
	o = derive_license_state(lines({"License acquired successfully. (Info: http://10.31.20.45:7070/request; GRID-Virtual-WS,2.0)",
					"Failed to renew license from s"}),
				 true, STARTED);
	CHECK(o.state == LicenseState::Unlicensed);
	CHECK(derive_license_state(lines({"Failed to renew license from s"}), true, STARTED).state == LicenseState::Unlicensed);
	// Through the journal: the renewal failure newer than the acquisition, with noise between.
	FakeGriddJournal j;
	j.log("License acquired successfully. (Info: http://10.31.20.45:7070/request; GRID-Virtual-WS,2.0)");
	j.log_many(50, NOISE);
	j.log("Failed to renew license from 10.31.20.45");
	j.log_many(50, NOISE);
	LicenseCounters c;
	look(j, c, RUN_A);
	CHECK(c.license == LicenseState::Unlicensed);
	FakeGriddJournal k;
	k.log(ACQUIRED);
	k.log("Failed to renew license from 10.31.20.45");
	LicenseCounters ck;
	look(k, ck, RUN_A, 1'796'141'000);
	CHECK(ck.license == LicenseState::Licensed);
	look(k, ck, RUN_A, 1796227200 + 3600);  // the lease ran out unrenewed
	CHECK(ck.license == LicenseState::Unlicensed);
}

TEST_CASE("each documented wording of an acquisition is licensed, with its expiry when it printed one", "[license-state]")
{
	const auto nls = classify_gridd_line("License acquired successfully. (Info: https://cls.nvidia.example/api, NVIDIA Virtual Compute "
					     "Server; Expiry: 2023-10-6 20:1:37 GMT)");
	CHECK(nls.kind == Kind::Acquired);
	CHECK(nls.expiry == std::optional<std::int64_t>(1696622497));
	const auto legacy = classify_gridd_line("License acquired successfully. (Info: http://10.31.20.45:7070/request; GRID-Virtual-WS,2.0)");
	CHECK(legacy.kind == Kind::Acquired);
	CHECK_FALSE(legacy.expiry);
	CHECK(classify_gridd_line("License renewed successfully. (Info: 10.0.0.5, NVIDIA RTX Virtual Workstation; Expiry: 2026-12-2 4:0:0 GMT)")
		      .kind == Kind::Acquired);
	CHECK(classify_gridd_line("LICENSE ACQUIRED SUCCESSFULLY").kind == Kind::Acquired);
	CHECK(classify_gridd_line("Acquired license successfully from 10.0.0.5").kind == Kind::Acquired);
}

TEST_CASE("each wording of a failure or a lost license is unlicensed", "[license-state]")
{
	for (const char *m : {"Failed to acquire license from 10.31.20.45",
			      "Failed to acquire license from XXX.XXX.XXX.XXX",
			      "Valid GRID license not found. GPU features and performance will be restricted. To enable full "
			      "functionality please configure licensing details.",
			      "License expired", "The license has expired", "License Status: Unlicensed (Restricted)",
			      "License returned successfully.", "License lost: server unreachable past the grace period"})
		CHECK(classify_gridd_line(m).kind == Kind::NotLicensed);
}

TEST_CASE("startup and configuration lines say nothing about the license", "[license-state]")
{
	for (const char *m : {"Started (1976)", "vGPU Software package (1)", "Platform initialized (2)", "Platform detection successful (2)",
			      "Configuration parameter ( ServerAddress  FeatureType) not set", "Calling load_byte_array(tra)",
			      "Acquiring license for GRID vGPU Edition.", "Invalid feature type requested",
			      "Failed to update local trusted store - Maximum buffer size exceeded", ""})
		CHECK(classify_gridd_line(m).kind == Kind::Nothing);
}

TEST_CASE("an expiry is read only in GMT or UTC, from unpadded fields, and never made up", "[license-state]")
{
	CHECK(parse_gridd_expiry("Expiry: 2023-10-6 20:1:37 GMT)") == std::optional<std::int64_t>(1696622497));
	CHECK(parse_gridd_expiry("expiry: 2023-10-06 20:01:37 UTC") == std::optional<std::int64_t>(1696622497));
	CHECK_FALSE(parse_gridd_expiry("Expiry: N/A"));
	CHECK_FALSE(parse_gridd_expiry("Expiry: 2023-10-6 20:1:37 PST"));  // a local zone cannot be placed
	CHECK_FALSE(parse_gridd_expiry("Expiry: 2023-13-6 20:1:37 GMT"));
	CHECK_FALSE(parse_gridd_expiry("Expiry: 2023-10-6"));
	CHECK_FALSE(parse_gridd_expiry("no expiry here"));
}

TEST_CASE("the newest message that says something decides; nothing yet is pending; not running is unknown", "[license-state]")
{
	const std::uint64_t started = 1'796'140'800'000'000;
	auto o = derive_license_state({}, true, started);
	CHECK(o.state == LicenseState::Pending);
	CHECK(o.since_usec == started);
	CHECK(derive_license_state(lines({"Started (1976)", "Platform detection successful (2)"}), true, started).state ==
	      LicenseState::Pending);
	o = derive_license_state(lines({"Started (1976)", "License acquired successfully. (Info: s, p; Expiry: 2026-12-2 16:0:0 GMT)"}), true,
				 started);
	CHECK(o.state == LicenseState::Licensed);
	CHECK(o.expiry == std::optional<std::int64_t>(1796227200));
	CHECK(o.since_usec == started + 2'000'000);
	o = derive_license_state(lines({"License acquired successfully.", "Failed to acquire license from s"}), true, started);
	CHECK(o.state == LicenseState::Unlicensed);
	CHECK_FALSE(o.expiry);
	CHECK(derive_license_state(lines({"Failed to acquire license from s", "License acquired successfully."}), true, started).state ==
	      LicenseState::Licensed);
	CHECK(derive_license_state(lines({"License acquired successfully."}), false, started).state == LicenseState::Unknown);
}

TEST_CASE("the kept state changes once per change, keeps its start, and knows the rotation it belongs to", "[license-state]")
{
	LicenseCounters c;
	c.last_applied = 1'796'140'000;
	c.applied_invocation = std::string(31, '0') + "7";
	GriddView v{std::string(31, '0') + "7", {LicenseState::Pending, std::nullopt, 1'796'140'100'000'000}};
	auto before = apply_license_view(c, v, 1'796'140'200);
	REQUIRE(before);
	CHECK(*before == LicenseState::Unknown);
	CHECK(c.license_since == 1'796'140'100);
	CHECK(c.license_rotation == c.last_applied);  // the run the rotation's restart began
	// The same state on the next run: no change, its start kept.
	v.observation.since_usec = 1'796'140'300'000'000;
	CHECK_FALSE(apply_license_view(c, v, 1'796'140'400));
	CHECK(c.license_since == 1'796'140'100);
	// Unlicensed: a change, from the message's time.
	v.observation = {LicenseState::Unlicensed, std::nullopt, 1'796'140'500'000'000};
	before = apply_license_view(c, v, 1'796'140'600);
	REQUIRE(before);
	CHECK(*before == LicenseState::Pending);
	CHECK(c.license_since == 1'796'140'500);
	// A run nvidia-gridd began on its own (a crash, a manual restart) belongs to no rotation.
	v.invocation_id = std::string(31, '0') + "8";
	apply_license_view(c, v, 1'796'140'700);
	CHECK(c.license_rotation == 0);

	const LicenseCounters back = LicenseCounters::parse(c.serialize());
	CHECK(back.license == LicenseState::Unlicensed);
	CHECK(back.license_since == c.license_since);
	CHECK(back.applied_invocation == c.applied_invocation);
	CHECK(LicenseCounters::parse("license bogus\napplied_invocation ../../etc\n").license == LicenseState::Unknown);
	CHECK(LicenseCounters::parse("applied_invocation ../../etc\n").applied_invocation.empty());
	CHECK(LicenseCounters::parse("license_since inf\nlicense_expiry nan\n").license_since == 0);
	CHECK(LicenseCounters::parse("license_since inf\nlicense_expiry nan\n").license_expiry == 0);
}

TEST_CASE("license metrics: one state at 1, the expiry only when licensed, nothing of the server or product", "[license-state]")
{
	LicenseCounters c;
	GriddView v{"", derive_license_state(lines({"License acquired successfully. (Info: https://dls.corp.example:443, NVIDIA Virtual "
						    "Compute Server; Expiry: 2026-12-2 16:0:0 GMT)"}),
					     true, 1)};
	apply_license_view(c, v, 1'796'140'900);
	std::string text = license_metrics_text(c, 1'796'140'900);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"licensed\"} 1\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"unlicensed\"} 0\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"pending\"} 0\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"unknown\"} 0\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_expiry_timestamp_seconds 1796227200\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state_since_seconds 1796140801\n") != std::string::npos);
	for (const char *secret : {"dls.corp.example", "Compute Server", "https"}) {
		CHECK(text.find(secret) == std::string::npos);
		CHECK(c.serialize().find(secret) == std::string::npos);
	}
	v.observation = {LicenseState::Unlicensed, std::nullopt, 1'796'141'000'000'000};
	apply_license_view(c, v, 1'796'141'000);
	text = license_metrics_text(c, 1'796'141'000);
	CHECK(text.find("unbounded_nvidia_license_expiry_timestamp_seconds") == std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_state{state=\"unlicensed\"} 1\n") != std::string::npos);
}

TEST_CASE("the sd-journal source reads a real journal file as the fake does", "[license-state]")
{
	// systemd-journal-remote writes journal files from the export format (Debian's
	// systemd-journal-remote, in make's test dependencies): no journald needed.
	const char *remote = "/lib/systemd/systemd-journal-remote";
	INFO(remote << " is required (Debian package systemd-journal-remote; make deps installs it)");
	REQUIRE(::access(remote, X_OK) == 0);
	test::TempDir t;
	std::string exported;
	auto entry = [&](const std::string &message, const std::string &run, int i) {
		exported += "__REALTIME_TIMESTAMP=" + std::to_string(1'796'140'800'000'000 + i * 1'000'000ull) +
			    "\n__MONOTONIC_TIMESTAMP=" + std::to_string(1'000'000 + i * 1'000'000ull) +
			    "\n_BOOT_ID=0123456789abcdef0123456789abcdef\n_SYSTEMD_UNIT=nvidia-gridd.service\n_SYSTEMD_INVOCATION_ID=" + run +
			    "\nMESSAGE=" + message + "\n\n";
	};
	int i = 0;
	entry("Started (1976)", RUN_A, i++);
	entry(ACQUIRED, RUN_A, i++);
	for (std::size_t n = 0; n <= MAX_GRIDD_ENTRIES; n++)
		entry(NOISE, RUN_A, i++);
	entry("Failed to acquire license from 10.31.20.45", RUN_B, i++);  // another run's: not this one's
	t.write("export", exported);
	::mkdir((t / "journal").c_str(), 0755);
	const std::string cmd = std::string(remote) + " -o " + (t / "journal/system.journal") + " - < " + (t / "export") + " 2>/dev/null";
	REQUIRE(std::system(cmd.c_str()) == 0);

	auto j = open_gridd_journal("nvidia-gridd.service", RUN_A, t / "journal");
	REQUIRE(j);
	auto read = read_gridd_license(**j, std::nullopt, STARTED);
	REQUIRE(read);
	CHECK(read->complete);
	CHECK(read->observation.state == LicenseState::Licensed);
	CHECK(read->observation.expiry == std::optional<std::int64_t>(1796227200));
	CHECK(read->entries <= 2 * MAX_GRIDD_ENTRIES);
	LicenseCounters c;
	apply_license_view(c, GriddView{RUN_A, read->observation, read->cursor}, 1'796'141'000);
	c = LicenseCounters::parse(c.serialize());
	REQUIRE_FALSE(c.journal_cursor.empty());  // sd-journal's cursor survives the state file's parser
	// The next run: only the memo's own entry is read.
	j = open_gridd_journal("nvidia-gridd.service", RUN_A, t / "journal");
	REQUIRE(j);
	read = read_gridd_license(**j, gridd_journal_memo(c, RUN_A), STARTED);
	REQUIRE(read);
	CHECK(read->entries == 1);
	CHECK(read->observation.state == LicenseState::Licensed);
	// A cursor the journal does not hold: everything is read again, nothing is made up.
	c.journal_cursor = "s=0123;i=1;b=2;m=3;t=4;x=5";
	j = open_gridd_journal("nvidia-gridd.service", RUN_A, t / "journal");
	REQUIRE(j);
	read = read_gridd_license(**j, gridd_journal_memo(c, RUN_A), STARTED);
	REQUIRE(read);
	CHECK(read->observation.state == LicenseState::Licensed);
	// Run B's journal holds its own failure only.
	j = open_gridd_journal("nvidia-gridd.service", RUN_B, t / "journal");
	REQUIRE(j);
	read = read_gridd_license(**j, gridd_journal_memo(c, RUN_B), STARTED);
	REQUIRE(read);
	CHECK(read->entries == 1);
	CHECK(read->observation.state == LicenseState::Unlicensed);
}

TEST_CASE("the FeatureType licensed on a boot of the host is kept for that boot, and one held back is published", "[license-state]")
{
	test::TempDir dir;
	Context ctx;
	ctx.root = dir.path();
	ctx.config.metrics_dir = "/metrics";
	dir.write("metrics/.keep", "");
	dir.write("proc/stat", "cpu  1 2 3\nintr 5\nbtime 1796140000\nprocesses 9\n");
	dir.write("proc/uptime", "5000.25 9000.50\n");
	dir.write("etc/nvidia/gridd.conf", "ServerAddress=a\nFeatureType=2\n");
	dir.write("state/.keep", "");
	const int state = ::open((dir / "state").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	REQUIRE(state >= 0);
	const auto metrics = [&] { return *fs::read_file(dir / "metrics/unbounded-nvidia-license.prom"); };

	CHECK_FALSE(licensed_feature_this_boot(ctx, state));  // nothing seen yet
	GriddView licensed{"0123456789abcdef0123456789abcdef", {LicenseState::Licensed, std::nullopt, 1'796'140'100'000'000}};
	record_license_metrics(ctx, state, ReloadOutcome::Unchanged, licensed);
	CHECK(licensed_feature_this_boot(ctx, state) == 2);
	CHECK(metrics().find("unbounded_nvidia_license_feature_type{which=\"licensed\"} 2\n") != std::string::npos);
	CHECK(metrics().find("unbounded_nvidia_license_reboot_required 0\n") != std::string::npos);

	// The installed file changing later does not change what the driver holds on this boot.
	dir.write("etc/nvidia/gridd.conf", "FeatureType=4\n");
	record_license_metrics(ctx, state, ReloadOutcome::RebootRequired, licensed, FeatureChange{4, 2});
	CHECK(licensed_feature_this_boot(ctx, state) == 2);
	CHECK(metrics().find("unbounded_nvidia_license_reboot_required 1\n") != std::string::npos);
	CHECK(metrics().find("unbounded_nvidia_license_feature_type{which=\"held_back\"} 4\n") != std::string::npos);
	CHECK(metrics().find("unbounded_nvidia_license_reloads_total{outcome=\"reboot-required\"} 1\n") != std::string::npos);
	// A failed run keeps what waits; an applied one ends it.
	record_license_metrics(ctx, state, ReloadOutcome::Failed, std::nullopt);
	CHECK(metrics().find("unbounded_nvidia_license_reboot_required 1\n") != std::string::npos);

	// A stepped clock (chrony's makestep) moves btime, within the same boot: nothing is forgotten.
	dir.write("proc/stat", "cpu  1 2 3\nbtime 1796140042\n");
	dir.write("proc/uptime", "5100.00 9100.00\n");
	CHECK(licensed_feature_this_boot(ctx, state) == 2);
	record_license_metrics(ctx, state, ReloadOutcome::RebootRequired, licensed, FeatureChange{4, 2});
	CHECK(metrics().find("unbounded_nvidia_license_reboot_required 1\n") != std::string::npos);
	// Nothing to tell boots apart by (no /proc/uptime): what was recorded stays.
	::unlink((dir / "proc/uptime").c_str());
	CHECK_FALSE(licensed_feature_this_boot(ctx, state));
	record_license_metrics(ctx, state, ReloadOutcome::Unchanged, std::nullopt);
	dir.write("proc/uptime", "5200.00 9200.00\n");
	CHECK(licensed_feature_this_boot(ctx, state) == 2);

	// The host rebooted (uptime went back): nothing is licensed on this boot until nvidia-gridd says
	// so, and nothing waits.
	dir.write("proc/uptime", "40.00 70.00\n");
	dir.write("proc/stat", "cpu  1 2 3\nbtime 1796150000\n");
	CHECK_FALSE(licensed_feature_this_boot(ctx, state));
	record_license_metrics(ctx, state, ReloadOutcome::Unchanged, std::nullopt);
	CHECK(metrics().find("unbounded_nvidia_license_reboot_required 0\n") != std::string::npos);
	CHECK(metrics().find("which=\"licensed\"") == std::string::npos);
	::close(state);
}
