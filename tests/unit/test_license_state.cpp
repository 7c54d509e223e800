// Issue 28: whether nvidia-gridd holds a license, derived from its journal lines (written from the
// messages NVIDIA's Client Licensing User Guide and field reports show, in each wording), and what
// the reloader keeps and publishes of it.
#include "license_metrics.hpp"
#include "license_state.hpp"

#include <catch2/catch.hpp>

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

}  // namespace

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
