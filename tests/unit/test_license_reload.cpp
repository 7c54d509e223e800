#include "fake_unit_manager.hpp"
#include "feature_type.hpp"
#include "license_reload.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fcntl.h>
#include <algorithm>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

using namespace unbounded;
using namespace std::chrono_literals;
using test::FakeUnitManager;

namespace {

const std::string GRIDD = "gridd.conf";
const std::string TOKEN = "client_configuration_token.tok";

// A machine root with a licensing source directory, the installed files, a fake nvidia-gridd, and
// seams that record sleeps instead of sleeping.
struct Machine {
	test::TempDir dir;
	Context ctx;
	FakeUnitManager units;
	std::vector<Millis> sleeps;  // the jitter: cut short by a stop, as the real one is
	std::vector<Millis> waits;   // inside a restart: waited out in full
	std::function<std::uint64_t(std::uint64_t)> random = [](std::uint64_t bound) { return bound / 2; };
	std::function<void(std::string_view)> after_stage;
	bool stop = false;
	std::optional<int> licensed;       // the FeatureType licensed on this boot of the host
	std::function<void()> sleep_hook;  // once, during the next jitter

	Machine()
	{
		ctx.root = dir.path();
		ctx.config.licensing.jitter = 10s;
		ctx.config.licensing.settle_time = 5s;
		// gridd stays up unless the installed gridd.conf says BROKEN (a malformed config)
		units.stays_up = [this] {
			auto f = fs::read_file(dir / "etc/nvidia/gridd.conf");
			return !f || f->find("BROKEN") == std::string::npos;
		};
	}
	ReloadSeams seams()
	{
		return ReloadSeams{[this](Millis d) {
					   if (stop)
						   return;  // honours a stop, like sleep_unless_stopped
					   sleeps.push_back(d);
					   units.clock += d;
					   if (sleep_hook)
						   std::exchange(sleep_hook, nullptr)();
				   },
				   [this](Millis d) {
					   waits.push_back(d);
					   units.clock += d;
				   },
				   [this](std::uint64_t b) { return random(b); },
				   [this](std::uint32_t p) { return units.alive.count(p) > 0; }, [this] { return stop; },
				   [this](std::string_view s) {
					   if (after_stage)
						   after_stage(s);
				   },
				   [this] { return licensed; }};
	}
	ReloadReport run()
	{
		LicenseReloader r(ctx, units, seams());
		auto rep = r.run();
		REQUIRE(rep);
		return *rep;
	}
	// Projected-volume layout: ..<ts>/files, ..data -> ..<ts>, gridd.conf -> ..data/gridd.conf.
	void project(const std::string &ts, const std::string &gridd, const std::string &token)
	{
		const std::string src = "run/host-nvidia-licensing/";
		dir.write(src + ".." + ts + "/" + GRIDD, gridd);
		dir.write(src + ".." + ts + "/" + TOKEN, token);
		dir.link(".." + ts, src + "..data_tmp");
		REQUIRE(::rename((dir / (src + "..data_tmp")).c_str(), (dir / (src + "..data")).c_str()) == 0);
		for (const auto &n : {GRIDD, TOKEN})
			if (::access((dir / (src + n)).c_str(), F_OK) != 0)
				dir.link("..data/" + n, src + n);
	}
	std::string installed(const std::string &name) const
	{
		auto path = name == GRIDD ? "etc/nvidia/gridd.conf" : "etc/nvidia/ClientConfigToken/client_configuration_token.tok";
		auto f = fs::read_file(dir / path);
		return f ? *f : "<absent>";
	}
	unsigned mode(const std::string &rel) const
	{
		struct stat st = {};
		REQUIRE(::stat((dir / rel).c_str(), &st) == 0);
		return st.st_mode & 07777;
	}
};

// The start of every rotation case: the first licence set (token-1) projected and applied, and the
// service manager's call log begun afresh, so that a case sees only the calls its rotation makes.
struct LicensedMachine : Machine {
	LicensedMachine()
	{
		project("2026_01", "FeatureType=1\n", "token-1");
		REQUIRE(run().outcome == ReloadOutcome::Applied);
		units.calls.clear();
	}
};

}  // namespace

TEST_CASE("a rotation restarts nvidia-gridd exactly once, with SIGTERM", "[license]")
{
	Machine m;
	m.project("2026_01", "FeatureType=1\nServerAddress=a\n", "token-1");
	auto first = m.run();
	CHECK(first.outcome == ReloadOutcome::Applied);
	CHECK(m.installed(GRIDD) == "FeatureType=1\nServerAddress=a\n");
	CHECK(m.installed(TOKEN) == "token-1");
	CHECK(m.mode("etc/nvidia/ClientConfigToken/client_configuration_token.tok") == 0600);
	CHECK(m.mode("etc/nvidia/gridd.conf") == 0644);
	m.units.calls.clear();

	m.project("2026_02", "FeatureType=1\nServerAddress=a\n", "token-2");
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Applied);
	CHECK(r.restarts == 1);
	CHECK(m.units.count("stop ") == 1);
	// The unit's kill settings were read before the stop (the refusals are tested below; what systemd
	// makes of the shipped drop-in, in the system tier).
	REQUIRE(m.units.calls.size() >= 3);
	CHECK(m.units.calls[0] == "status nvidia-gridd.service");
	CHECK(m.units.calls[1] == "status nvidia-gridd.service");
	CHECK(m.units.calls[2] == "stop nvidia-gridd.service");
	CHECK(m.units.count("start ") == 1);
	CHECK(m.installed(TOKEN) == "token-2");
}

TEST_CASE("unchanged content or an mtime-only change does nothing", "[license]")
{
	LicensedMachine m;
	m.sleeps.clear();
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	// touch: new mtimes, same bytes
	const struct timespec later[2] = {{2000000000, 0}, {2000000000, 0}};
	REQUIRE(::utimensat(AT_FDCWD, (m.dir / "run/host-nvidia-licensing/..2026_01/gridd.conf").c_str(), later, 0) == 0);
	// and the same content re-projected under a new timestamp directory (kubelet's resync)
	m.project("2026_99", "FeatureType=1\n", "token-1");
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	CHECK(m.units.count("stop") == 0);
	CHECK(m.units.count("start") == 0);
	CHECK(m.sleeps.empty());
}

TEST_CASE("a broken gridd.conf is rolled back and not retried until it changes", "[license]")
{
	LicensedMachine m;

	m.project("2026_02", "BROKEN\n", "token-2");
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::RolledBack);
	CHECK(r.restarts == 2);  // with the new files, then with the last known good ones
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");
	CHECK(m.installed(TOKEN) == "token-1");
	CHECK(m.units.active == "active");
	// The rollback's restart stops nothing: the broken files' daemon is down already.
	CHECK(m.units.count("stop nvidia-gridd.service") == 1);
	CHECK(m.units.count("start nvidia-gridd.service") == 2);

	m.units.calls.clear();
	auto again = m.run();
	CHECK(again.outcome == ReloadOutcome::KnownBad);
	CHECK(m.units.count("stop") == 0);
	CHECK(m.units.count("start") == 0);

	m.project("2026_03", "FeatureType=1\nfixed\n", "token-3");
	CHECK(m.run().outcome == ReloadOutcome::Applied);
	CHECK(m.installed(GRIDD) == "FeatureType=1\nfixed\n");
}

TEST_CASE("the jitter is the random draw over the whole window, slept before acting", "[license]")
{
	// The draw itself is random_below (tests/unit/test_random.cpp: bounds and spread); here, that the
	// reloader asks for [0, jitter] in ms and sleeps exactly what it drew, at both ends of the window.
	for (std::uint64_t pick : {std::uint64_t(0), std::uint64_t(60'000), std::uint64_t(12'345)}) {
		Machine m;
		m.ctx.config.licensing.jitter = 60s;
		std::vector<std::uint64_t> bounds;
		m.random = [&](std::uint64_t bound) {
			bounds.push_back(bound);
			return pick;
		};
		m.project("2026_01", "FeatureType=1\n", "token-1");
		auto r = m.run();
		REQUIRE(r.outcome == ReloadOutcome::Applied);
		CHECK(bounds == std::vector<std::uint64_t>{60'001});
		CHECK(r.jitter == Millis(pick));
		REQUIRE_FALSE(m.sleeps.empty());
		CHECK(m.sleeps.front() == Millis(pick));
	}

	Machine z;
	z.ctx.config.licensing.jitter = 0s;
	z.random = [](std::uint64_t) -> std::uint64_t { FAIL("no randomness without jitter"); return 0; };
	z.project("2026_01", "FeatureType=1\n", "token-1");
	CHECK(z.run().jitter == 0ms);
}

TEST_CASE("SIGTERM during a restart: the settle time is waited out, a crashing daemon is not applied", "[license]")
{
	LicensedMachine m;
	m.units.crashes_after = [&] {  // with the new files, gridd dies two seconds after its start
		return m.installed(TOKEN) == "token-2" ? std::optional<Millis>(2s) : std::nullopt;
	};
	m.project("2026_02", "FeatureType=1\n", "token-2");
	m.after_stage = [&](std::string_view stage) {
		if (stage == "installed")
			m.stop = true;  // systemctl stop, or a shutdown, while nvidia-gridd restarts
	};
	m.waits.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::RolledBack);
	CHECK(std::count(m.waits.begin(), m.waits.end(), 5s) == 2);  // the settle time, twice, in full
	CHECK(m.installed(TOKEN) == "token-1");
	// Nothing unverified became the last known good: the next run (crash fixed) retries nothing yet.
	m.stop = false;
	m.after_stage = nullptr;
	m.units.crashes_after = [] { return std::optional<Millis>(); };
	CHECK(m.run().outcome == ReloadOutcome::KnownBad);
}

TEST_CASE("a shutdown that refuses the start before the reloader is told to stop records nothing as failed", "[license]")
{
	// The shutdown transaction cancels the start job first; SIGTERM reaches the reloader a moment later.
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	m.after_stage = [&](std::string_view stage) {
		if (stage == "installed") {
			m.units.refuses_start = true;
			m.units.stopping = true;
		}
	};
	m.units.calls.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Interrupted);
	CHECK(m.installed(TOKEN) == "token-2");
	CHECK(m.dir.exists("var/lib/unbounded-nvidia/license/restarting.state"));
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/failed.state"));
	CHECK(m.units.count("start") == 1);  // no rollback restart into a shutdown
}

TEST_CASE("nvidia-gridd stopped by a shutdown while the restart settles is not judged", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	m.units.crashes_after = [&] {
		if (m.installed(TOKEN) != "token-2")
			return std::optional<Millis>();
		m.units.stopping = true;  // the shutdown stops it during the settle time
		return std::optional<Millis>(Millis(1000));
	};
	m.units.calls.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Interrupted);
	CHECK(m.installed(TOKEN) == "token-2");
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/failed.state"));
	CHECK(m.units.count("start") == 1);

	SECTION("outside a shutdown the same death is a failure")
	{
		LicensedMachine n;
		n.project("2026_02", "FeatureType=1\n", "token-2");
		n.units.crashes_after = [&] {
			return n.installed(TOKEN) == "token-2" ? std::optional<Millis>(Millis(1000)) : std::nullopt;
		};
		CHECK(n.run().outcome == ReloadOutcome::RolledBack);
		CHECK(n.dir.exists("var/lib/unbounded-nvidia/license/failed.state"));
	}
}

TEST_CASE("a shutdown refusing the start leaves the outcome unknown, re-evaluated by the next run", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	m.after_stage = [&](std::string_view stage) {
		if (stage == "installed") {
			m.stop = true;
			m.units.refuses_start = true;
		}
	};
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Interrupted);
	CHECK(m.installed(TOKEN) == "token-2");  // for the next start of nvidia-gridd
	CHECK(m.dir.exists("var/lib/unbounded-nvidia/license/restarting.state"));
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/failed.state"));

	SECTION("the next run restarts and judges them, it does not take them as applied")
	{
		m.stop = false;
		m.units.refuses_start = false;
		m.after_stage = nullptr;
		m.units.active = "inactive";                // stopped by the shutdown...
		m.units.start("nvidia-gridd.service", 1s);  // ...and started again at the next boot
		m.units.calls.clear();
		auto next = m.run();
		CHECK(next.outcome == ReloadOutcome::Applied);
		CHECK(m.units.count("start") == 1);
		CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/restarting.state"));
		CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	}
	SECTION("a boot install takes them over, and the run after nvidia-gridd's start verifies them")
	{
		m.stop = false;
		m.units.refuses_start = false;
		m.after_stage = nullptr;
		LicenseReloader boot(m.ctx, m.units, m.seams());
		m.units.calls.clear();
		auto b = boot.install_at_boot();
		REQUIRE(b);
		CHECK(b->outcome == ReloadOutcome::Installed);
		CHECK(m.units.calls.empty());
		m.units.active = "inactive";
		m.units.start("nvidia-gridd.service", 1s);  // its first start reads token-2
		m.units.calls.clear();
		CHECK(m.run().outcome == ReloadOutcome::Verified);
		CHECK(m.units.count("stop") == 0);
		CHECK(m.units.count("start") == 0);
		CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	}
}

TEST_CASE("the boot install puts the files in place before nvidia-gridd starts, and nothing restarts", "[license]")
{
	Machine m;  // a fresh or repaved machine: no installed files, no state
	m.project("2026_01", "FeatureType=1\n", "token-1");
	m.units.active = "inactive";
	LicenseReloader boot(m.ctx, m.units, m.seams());
	auto b = boot.install_at_boot();
	REQUIRE(b);
	CHECK(b->outcome == ReloadOutcome::Installed);
	CHECK(m.units.calls.empty());  // no service manager at boot
	CHECK(m.sleeps.empty());       // no jitter
	CHECK(m.installed(TOKEN) == "token-1");
	CHECK(m.mode("etc/nvidia/ClientConfigToken/client_configuration_token.tok") == 0600);

	m.units.start("nvidia-gridd.service", 1s);
	m.units.calls.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Verified);
	CHECK(m.units.count("stop") == 0);
	CHECK(m.units.count("start") == 0);
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	// The next boot with nothing new installs nothing.
	auto again = LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot();
	REQUIRE(again);
	CHECK(again->outcome == ReloadOutcome::Unchanged);
}

TEST_CASE("one rotation is one restart when the boot install's check had to wait for nvidia-gridd", "[license]")
{
	// Issue 26, item 11. A run that finds nvidia-gridd still activating leaves the boot install's
	// check to the next run and goes on; when that run applies a rotation, the boot-installed files are
	// superseded. Before, the next run's check still recorded them as applied, over the rotation's
	// record, and restarted nvidia-gridd a second time for the same rotation.
	Machine m;
	m.project("2026_01", "FeatureType=1\n", "token-1");
	m.units.active = "inactive";
	REQUIRE(LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot()->outcome == ReloadOutcome::Installed);
	m.units.start("nvidia-gridd.service", 1s);
	m.units.active = "activating";  // a forking daemon on a loaded machine, not yet up
	m.project("2026_02", "FeatureType=1\n", "token-2");
	m.units.calls.clear();
	auto first = m.run();
	CHECK(first.outcome == ReloadOutcome::Applied);
	CHECK(first.restarts == 1);
	CHECK(m.installed(TOKEN) == "token-2");
	m.units.calls.clear();
	auto second = m.run();
	CHECK(second.outcome == ReloadOutcome::Unchanged);
	CHECK(second.restarts == 0);
	CHECK(m.units.count("stop") == 0);
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/installed-at-boot.state"));
}

TEST_CASE("files installed at boot that nvidia-gridd cannot run with are rolled back", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\nBROKEN\n", "token-2");  // rotated while the machine was off
	REQUIRE(LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot()->outcome == ReloadOutcome::Installed);
	m.units.active = "inactive";
	m.units.start("nvidia-gridd.service", 1s);  // fails with the broken config
	REQUIRE(m.units.active == "failed");
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::RolledBack);
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");
	CHECK(m.units.active == "active");
	// The next boot starts nvidia-gridd with the last known good, not the config that failed.
	auto b = LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot();
	REQUIRE(b);
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");
	CHECK(m.run().outcome == ReloadOutcome::KnownBad);
}

TEST_CASE("a boot never records files that failed as applied, when there is no last known good", "[license]")
{
	// Review finding 6. Files that failed, with nothing to roll back to, stay installed. The next
	// boot's install took them for new ones: it recorded them as installed at boot, and the run after
	// nvidia-gridd's start recorded them as applied when it happened to come up this time.
	Machine m;  // a fresh machine: no last known good
	m.project("2026_01", "FeatureType=1\nBROKEN\n", "token-1");
	REQUIRE(LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot()->outcome == ReloadOutcome::Installed);
	m.units.active = "inactive";
	m.units.start("nvidia-gridd.service", 1s);  // fails with the broken config
	REQUIRE(m.run().outcome == ReloadOutcome::Failed);
	REQUIRE(m.installed(GRIDD) == "FeatureType=1\nBROKEN\n");  // nothing to return to

	m.units.stays_up = [] { return true; };  // this time it happens to come up
	auto b = LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot();
	REQUIRE(b);
	CHECK(b->outcome == ReloadOutcome::KnownBad);
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/installed-at-boot.state"));
	m.units.start("nvidia-gridd.service", 1s);
	CHECK(m.run().outcome == ReloadOutcome::KnownBad);
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/applied.state"));
	// New files are new: the next boot installs them as usual.
	m.project("2026_02", "FeatureType=1\n", "token-2");
	CHECK(LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot()->outcome == ReloadOutcome::Installed);
}

TEST_CASE("a boot with a last known good that also failed once starts with it, unchanged", "[license]")
{
	// The applied files reinstalled at boot (someone edited them) and nvidia-gridd not coming up:
	// with nothing else to return to they are recorded as failed and stay the last known good. The
	// next boot has them installed and applied: unchanged, as the regular run says, not known bad.
	LicensedMachine m;
	m.dir.write("etc/nvidia/gridd.conf", "edited\n");
	REQUIRE(LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot()->outcome == ReloadOutcome::Installed);
	REQUIRE(m.installed(GRIDD) == "FeatureType=1\n");
	m.units.stays_up = [] { return false; };
	m.units.active = "inactive";
	m.units.start("nvidia-gridd.service", 1s);
	REQUIRE(m.run().outcome == ReloadOutcome::Failed);
	REQUIRE(m.dir.exists("var/lib/unbounded-nvidia/license/failed.state"));
	auto b = LicenseReloader(m.ctx, m.units, m.seams()).install_at_boot();
	REQUIRE(b);
	CHECK(b->outcome == ReloadOutcome::Unchanged);
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
}

TEST_CASE("the boot install does nothing when switched off or without a source", "[license]")
{
	Machine off;
	off.ctx.config.licensing.auto_reload = false;
	off.project("2026_01", "FeatureType=1\n", "token-1");
	CHECK(LicenseReloader(off.ctx, off.units, off.seams()).install_at_boot()->outcome == ReloadOutcome::Disabled);
	CHECK(off.installed(GRIDD) == "<absent>");
	Machine none;
	CHECK(LicenseReloader(none.ctx, none.units, none.seams()).install_at_boot()->outcome == ReloadOutcome::NoSource);
}

TEST_CASE("the kill switch and the interval knob", "[license]")
{
	Machine m;
	auto env = [](const char *n) -> std::optional<std::string> {
		std::string_view v(n);
		if (v == "VGPU_LICENSE_AUTO_RELOAD")
			return "false";
		if (v == "VGPU_LICENSE_RELOAD_INTERVAL")
			return "45";
		return std::nullopt;
	};
	CHECK(apply_license_environment(m.ctx.config.licensing, env).empty());
	CHECK(m.ctx.config.licensing.reload_interval == 45s);
	CHECK_FALSE(m.ctx.config.licensing.auto_reload);
	m.project("2026_01", "FeatureType=1\n", "token-1");
	CHECK(m.run().outcome == ReloadOutcome::Disabled);
	CHECK(m.units.calls.empty());
	CHECK(m.installed(GRIDD) == "<absent>");

	LicensingConfig lic;
	auto yes = [](const char *n) -> std::optional<std::string> {
		return std::string_view(n) == "VGPU_LICENSE_AUTO_RELOAD" ? std::optional<std::string>("true") : std::nullopt;
	};
	CHECK(apply_license_environment(lic, yes).empty());
	CHECK(lic.auto_reload);
}

TEST_CASE("the interval knob is a duration, as the configuration's are", "[license]")
{
	const std::pair<const char *, long> cases[] = {{"90", 90'000}, {"2m", 120'000}, {"1m30s", 90'000}, {"1500ms", 1'500}, {"1s", 1'000}};
	for (const auto &[text, ms] : cases) {
		LicensingConfig lic;
		auto env = [value = text](const char *n) -> std::optional<std::string> {
			return std::string_view(n) == "VGPU_LICENSE_RELOAD_INTERVAL" ? std::optional<std::string>(value) : std::nullopt;
		};
		CHECK(apply_license_environment(lic, env).empty());
		CHECK(lic.reload_interval == Millis(ms));
	}
}

TEST_CASE("a bad interval knob is ignored with a warning, never switching rotation off", "[license]")
{
	for (const char *bad : {"soon", "0.5", "0", "-5", "30x", "500ms"}) {
		LicensingConfig lic;
		lic.reload_interval = 45s;  // from the config file
		auto env = [bad](const char *n) -> std::optional<std::string> {
			return std::string_view(n) == "VGPU_LICENSE_RELOAD_INTERVAL" ? std::optional<std::string>(bad) : std::nullopt;
		};
		auto w = apply_license_environment(lic, env);
		REQUIRE(w.size() == 1);
		CHECK(w[0] == std::string("Ignoring VGPU_LICENSE_RELOAD_INTERVAL='") + bad +
				      "': not a duration of at least 1s; using 45s");
		CHECK(lic.reload_interval == 45s);
		CHECK(lic.auto_reload);
	}
}

TEST_CASE("the environment file overrides the process environment, as EnvironmentFile= does", "[license]")
{
	test::TempDir d;
	d.write("default", "# comment\n; another\n\nVGPU_LICENSE_RELOAD_INTERVAL=\"90\"\n  VGPU_LICENSE_AUTO_RELOAD = 'true'  \nnot a line\n");
	::setenv("VGPU_LICENSE_RELOAD_INTERVAL", "15", 1);
	::setenv("UNBOUNDED_TEST_ONLY_IN_ENV", "x", 1);
	std::vector<std::string> warnings;
	auto env = license_environment(d / "default", warnings);
	CHECK(warnings.empty());
	CHECK(env("VGPU_LICENSE_RELOAD_INTERVAL") == std::optional<std::string>("90"));
	CHECK(env("VGPU_LICENSE_AUTO_RELOAD") == std::optional<std::string>("true"));
	CHECK(env("UNBOUNDED_TEST_ONLY_IN_ENV") == std::optional<std::string>("x"));
	CHECK_FALSE(env("UNBOUNDED_TEST_UNSET"));
	auto absent = license_environment(d / "nonexistent", warnings);
	CHECK(absent("VGPU_LICENSE_RELOAD_INTERVAL") == std::optional<std::string>("15"));
	CHECK(warnings.empty());
	::unsetenv("VGPU_LICENSE_RELOAD_INTERVAL");
	::unsetenv("UNBOUNDED_TEST_ONLY_IN_ENV");
}

TEST_CASE("legacy files are the per-file fallback of the source directory", "[license]")
{
	Machine m;
	m.dir.write("drivers/gridd.conf", "legacy-gridd\n");
	m.dir.write("drivers/ClientConfigToken/client_configuration_token.tok", "legacy-token");
	CHECK(m.run().outcome == ReloadOutcome::Applied);
	CHECK(m.installed(GRIDD) == "legacy-gridd\n");
	CHECK(m.installed(TOKEN) == "legacy-token");

	// A partial directory: gridd.conf from it, the token still from the legacy path.
	m.dir.write("run/host-nvidia-licensing/gridd.conf", "dir-gridd\n");
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Applied);
	CHECK(m.installed(GRIDD) == "dir-gridd\n");
	CHECK(m.installed(TOKEN) == "legacy-token");
}

TEST_CASE("a ..data swap of a projected volume is seen through the symlinks", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	(void)fs::remove_tree_at(AT_FDCWD, m.dir / "run/host-nvidia-licensing/..2026_01", "old");
	m.units.calls.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Applied);
	CHECK(m.installed(TOKEN) == "token-2");
	CHECK(m.units.count("start") == 1);
}

TEST_CASE("a symlink leading out of the source directory is refused, and says so", "[license][hostile]")
{
	for (const char *target : {"../../secret-elsewhere", "/secret-elsewhere"}) {
		INFO(target);
		Machine m;
		m.dir.write("secret-elsewhere", "not a license");
		m.dir.link(target, "run/host-nvidia-licensing/gridd.conf");
		LicenseReloader r(m.ctx, m.units, m.seams());
		auto rep = r.run();
		REQUIRE_FALSE(rep);
		CHECK_THAT(rep.error().message, Catch::Contains("/run/host-nvidia-licensing/gridd.conf"));
		// Issue 10, class 10: what RESOLVE_BENEATH answers (EXDEV) is not what the operator is told.
		CHECK_THAT(rep.error().message, Catch::Contains("leads outside the licensing source directory"));
		CHECK_THAT(rep.error().message, !Catch::Contains("cross-device"));
		CHECK(m.installed(GRIDD) == "<absent>");
	}
}

TEST_CASE("a rotation landing between record and install is applied, not dropped", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	bool rotated = false;
	m.after_stage = [&](std::string_view stage) {
		if (stage == "recorded" && !rotated) {
			rotated = true;
			m.project("2026_03", "FeatureType=1\n", "token-3");
		}
	};
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Applied);
	CHECK(r.applied == 2);
	CHECK(m.installed(TOKEN) == "token-3");
	CHECK(m.units.count("start") == 2);
	m.after_stage = nullptr;
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
}

TEST_CASE("the first run records installed files without a restart", "[license]")
{
	Machine m;
	m.project("2026_01", "FeatureType=1\n", "token-1");
	m.dir.write("etc/nvidia/gridd.conf", "FeatureType=1\n");
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0600);
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Recorded);
	CHECK(m.units.count("stop") == 0);
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
}

TEST_CASE("a broken rotation killed before it was judged is rolled back to the files nvidia-gridd ran with", "[license]")
{
	// A machine set up before the reloader: no record of what was applied, the installed files are
	// what nvidia-gridd runs with. A run killed between installing the broken files and judging them
	// used to leave the next run nothing to roll back to but the broken files themselves.
	Machine m;
	m.dir.write("etc/nvidia/gridd.conf", "FeatureType=1\n");
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0600);
	m.project("2026_02", "BROKEN\n", "token-2");
	m.after_stage = [](std::string_view stage) {
		if (stage == "installed")
			throw std::runtime_error("SIGKILL");  // the run ends here, as a kill ends it
	};
	CHECK_THROWS(LicenseReloader(m.ctx, m.units, m.seams()).run());
	CHECK(m.installed(GRIDD) == "BROKEN\n");
	m.after_stage = nullptr;
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::RolledBack);
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");
	CHECK(m.installed(TOKEN) == "token-1");
	CHECK(m.units.active == "active");
	CHECK(m.run().outcome == ReloadOutcome::KnownBad);
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");
}

TEST_CASE("an interrupted restart is resumed when the files crashed nvidia-gridd, never when it was stopped", "[license]")
{
	// The run is killed after the broken files' start job: nvidia-gridd went down with them.
	auto killed_after_start = [](Machine &m) {
		m.dir.write("etc/nvidia/gridd.conf", "FeatureType=1\n");
		m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0600);
		m.project("2026_02", "BROKEN\n", "token-2");
		m.after_stage = [](std::string_view stage) {
			if (stage == "installed")
				throw std::runtime_error("SIGKILL");
		};
		CHECK_THROWS(LicenseReloader(m.ctx, m.units, m.seams()).run());
		m.after_stage = nullptr;
		m.units.calls.clear();
	};
	SECTION("failed: started and judged, then rolled back")
	{
		Machine m;
		killed_after_start(m);
		m.units.active = "failed";
		m.units.pid = 0;
		CHECK(m.run().outcome == ReloadOutcome::RolledBack);
		CHECK(m.installed(GRIDD) == "FeatureType=1\n");
		CHECK(m.units.active == "active");
	}
	SECTION("stopped by our own stop job before the kill: started and judged")
	{
		LicensedMachine m;
		m.project("2026_02", "FeatureType=2\n", "token-2");
		m.units.killed_at_start = true;  // the run is killed between its stop job and its start job
		CHECK_THROWS(LicenseReloader(m.ctx, m.units, m.seams()).run());
		REQUIRE(m.units.active == "inactive");
		m.units.killed_at_start = false;
		m.units.calls.clear();
		CHECK(m.run().outcome == ReloadOutcome::Applied);
		CHECK(m.units.count("start") == 1);
		CHECK(m.units.active == "active");
		CHECK(m.installed(TOKEN) == "token-2");
	}
	SECTION("stopped by an operator: stays stopped")
	{
		Machine m;
		killed_after_start(m);
		m.units.active = "inactive";
		m.units.pid = 0;
		m.run();
		CHECK(m.units.count("start") == 0);
		CHECK(m.units.active == "inactive");
	}
}

TEST_CASE("a restart judged good and killed before it cleared its record is not done twice", "[license]")
{
	LicensedMachine m;
	m.project("2026_02", "FeatureType=1\n", "token-2");
	CHECK(m.run().outcome == ReloadOutcome::Applied);
	// What a kill between the applied record and the end of the restart's record leaves.
	const std::string state = "var/lib/unbounded-nvidia/license/";
	REQUIRE(::link((m.dir / (state + "applied.state")).c_str(), (m.dir / (state + "restarting.state")).c_str()) == 0);
	m.units.calls.clear();
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	CHECK(m.units.count("stop") == 0);
	CHECK(m.units.count("start") == 0);
	CHECK(::access((m.dir / (state + "restarting.state")).c_str(), F_OK) != 0);
}

TEST_CASE("installed files that failed before are never recorded as the applied ones", "[license]")
{
	Machine m;
	m.project("2026_01", "BROKEN\n", "token-1");
	m.dir.write("etc/nvidia/gridd.conf", "BROKEN\n");
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0600);
	// The record an earlier run's rollback left.
	m.project("2026_02", "FeatureType=1\n", "token-0");
	m.dir.write("etc/nvidia/gridd.conf", "FeatureType=1\n");
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-0", 0600);
	REQUIRE(m.run().outcome == ReloadOutcome::Recorded);
	m.project("2026_03", "BROKEN\n", "token-1");
	REQUIRE(m.run().outcome == ReloadOutcome::RolledBack);
	const std::string state = "var/lib/unbounded-nvidia/license/";
	REQUIRE(::unlink((m.dir / (state + "applied.state")).c_str()) == 0);  // lost, as on a machine before the fix
	m.dir.write("etc/nvidia/gridd.conf", "BROKEN\n");
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0600);
	CHECK(m.run().outcome == ReloadOutcome::KnownBad);
	CHECK(::access((m.dir / (state + "applied.state")).c_str(), F_OK) != 0);
}

TEST_CASE("never SIGKILL, never a second daemon", "[license]")
{
	SECTION("a unit that would escalate to SIGKILL is not restarted")
	{
		Machine m;
		m.units.send_sigkill = true;
		m.project("2026_01", "FeatureType=1\n", "token-1");
		auto r = m.run();
		CHECK(r.outcome == ReloadOutcome::Failed);
		CHECK(m.units.count("stop") == 0);
		CHECK(m.installed(GRIDD) == "<absent>");  // files put back as they were
		CHECK_THAT(r.messages.back(), Catch::Contains("SendSIGKILL=yes"));
	}
	SECTION("a daemon that outlives SIGTERM is not joined by a second one")
	{
		Machine m;
		m.dir.write("etc/nvidia/gridd.conf", "old\n");
		m.units.ignores_sigterm = true;
		m.project("2026_01", "FeatureType=1\n", "token-1");
		auto r = m.run();
		CHECK(r.outcome == ReloadOutcome::Failed);
		CHECK(m.units.count("stop") == 1);
		CHECK(m.units.count("start") == 0);
		CHECK(m.installed(GRIDD) == "old\n");
		CHECK_THAT(r.messages.back(), Catch::Contains("not starting a second instance"));
		// not recorded: retried on the next trigger
		m.units.ignores_sigterm = false;
		m.units.active = "active";
		m.units.pid = 100;
		CHECK(m.run().outcome == ReloadOutcome::Applied);
	}
}

TEST_CASE("nvidia-gridd not running: files installed for its next start, no restart", "[license]")
{
	Machine m;
	m.units.active = "inactive";
	m.units.pid = 0;
	m.project("2026_01", "FeatureType=1\n", "token-1");
	CHECK(m.run().outcome == ReloadOutcome::Applied);
	CHECK(m.units.count("start") == 0);
	CHECK(m.installed(TOKEN) == "token-1");
}

TEST_CASE("SIGTERM during the jitter ends the run with nothing changed", "[license]")
{
	Machine m;
	m.stop = true;
	m.project("2026_01", "FeatureType=1\n", "token-1");
	CHECK(m.run().outcome == ReloadOutcome::Interrupted);
	CHECK(m.installed(GRIDD) == "<absent>");
	CHECK(m.units.calls.empty());
}

TEST_CASE("no licensing content ever reaches the log", "[license]")
{
	Machine m;
	m.project("2026_01", "ServerAddress=SECRET-HOST\n", "SECRET-TOKEN");
	// capture stderr, where log lines go outside systemd
	std::fflush(stderr);
	int saved = ::dup(STDERR_FILENO);
	const std::string capture = m.dir / "stderr.txt";
	int fd = ::open(capture.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	::dup2(fd, STDERR_FILENO);
	m.run();
	m.project("2026_02", "BROKEN SECRET-HOST\n", "SECRET-TOKEN-2");
	auto r = m.run();
	::dup2(saved, STDERR_FILENO);
	::close(fd);
	::close(saved);
	auto text = fs::read_file(capture);
	REQUIRE(text);
	CHECK(r.outcome == ReloadOutcome::RolledBack);
	CHECK_FALSE(text->empty());
	CHECK(text->find("SECRET") == std::string::npos);
	for (const auto &msg : r.messages)
		CHECK(msg.find("SECRET") == std::string::npos);
}

TEST_CASE("license state files round-trip and reject damage", "[license]")
{
	LicenseSet s;
	s.files["gridd.conf"] = "a\nb\n";
	s.files["client_configuration_token.tok"] = std::string("bin\0ary\n", 8);
	auto back = LicenseSet::parse(s.serialize());
	REQUIRE(back);
	CHECK(*back == s);
	const std::string text = s.serialize();
	for (std::size_t cut = 0; cut < text.size(); cut++)
		CHECK_FALSE(LicenseSet::parse(text.substr(0, cut)) == s);
}

// Found by fuzz-license_state_file: a size of 2^64 - 1 made the bounds check's size + 1 wrap to 0,
// and the parser read the byte before the text (fuzz/regressions/license_state_file/).
TEST_CASE("a license state file whose size wraps is refused, nothing read outside it", "[license][hostile]")
{
	const std::string max = std::to_string(std::numeric_limits<std::size_t>::max());
	for (const std::string &size : {max, std::to_string(std::numeric_limits<std::size_t>::max() - 1), std::string("6")}) {
		INFO(size);
		// A wrapped index lands on the header's own newline, and a wrapped advance of 0 then reads the
		// file's bytes as the next header: the old parser returned a set of two made-up files.
		const std::string text = "UNBOUNDED-LICENSE-STATE 1\ngridd.conf " + size + "\nx 0\n\n";
		const std::string_view view(text.data(), text.size());
		CHECK_FALSE(LicenseSet::parse(view));
	}
}

// Issue 10, class 5: the licensing projection is writable by whoever controls the Secret's volume.
TEST_CASE("a FIFO among the licensing files is refused at once, never read", "[license][hostile]")
{
	for (const char *where : {"run/host-nvidia-licensing/gridd.conf", "drivers/gridd.conf"}) {
		INFO(where);
		Machine m;
		m.dir.mkdir(fs::dirname(where));
		REQUIRE(::mkfifo((m.dir / where).c_str(), 0644) == 0);
		LicenseReloader r(m.ctx, m.units, m.seams());
		const auto start = std::chrono::steady_clock::now();
		auto rep = r.run();  // a blocking open would never return: the test would hang, not pass
		CHECK(std::chrono::steady_clock::now() - start < 10s);
		REQUIRE_FALSE(rep);
		CHECK_THAT(rep.error().message, Catch::Contains("is a FIFO, not a regular file"));
		CHECK_THAT(rep.error().message, Catch::Contains(fs::basename(where)));
		CHECK(m.installed(GRIDD) == "<absent>");
	}
}

// Issue 10, class 10: modes are enforced on every run, the recording run included.
TEST_CASE("an installed token is made 0600 even when only recorded", "[license][hostile]")
{
	Machine m;
	m.project("2026_01", "FeatureType=1\n", "token-1");
	m.dir.write("etc/nvidia/gridd.conf", "FeatureType=1\n", 0666);
	m.dir.write("etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0644);
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::Recorded);
	CHECK(m.mode("etc/nvidia/ClientConfigToken/client_configuration_token.tok") == 0600);
	CHECK(m.mode("etc/nvidia/gridd.conf") == 0644);
	// And on a run with nothing to do, after someone loosened it again.
	::chmod((m.dir / "etc/nvidia/ClientConfigToken/client_configuration_token.tok").c_str(), 0644);
	CHECK(m.run().outcome == ReloadOutcome::Unchanged);
	CHECK(m.mode("etc/nvidia/ClientConfigToken/client_configuration_token.tok") == 0600);
	CHECK(m.units.count("stop") == 0);
}

TEST_CASE("a license record of a newer state format is refused, saying so; this release's is read", "[license]")
{
	LicenseSet set;
	set.files["gridd.conf"] = "FeatureType=1\n";
	const std::string ours = set.serialize();
	CHECK(ours.starts_with("UNBOUNDED-LICENSE-STATE 1\n"));
	REQUIRE(LicenseSet::parse(ours));
	CHECK_FALSE(LicenseSet::newer_format(ours, "applied.state"));
	std::string newer = ours;
	newer.replace(0, std::string("UNBOUNDED-LICENSE-STATE 1").size(), "UNBOUNDED-LICENSE-STATE 2");
	CHECK_FALSE(LicenseSet::parse(newer));
	const auto why = LicenseSet::newer_format(newer, "applied.state");
	REQUIRE(why);
	CHECK(*why == "applied.state was written by a newer release (state format 2; this release reads 1)");
	CHECK_FALSE(LicenseSet::newer_format("garbage", "applied.state"));
}

TEST_CASE("gridd.conf's FeatureType is read and mapped as nvidia-settings does", "[license]")
{
	CHECK(gridd_feature_type("") == 0);
	CHECK(gridd_feature_type("ServerAddress=a\n") == 0);
	CHECK(gridd_feature_type("FeatureType=4\n") == 4);
	CHECK(gridd_feature_type("FeatureType=1\n") == 1);
	CHECK(gridd_feature_type(" Feature Type = 2 \r\n") == 2);  // every blank removed first
	CHECK(gridd_feature_type("#FeatureType=4\nFeatureType=2\n") == 2);
	CHECK(gridd_feature_type("FeatureType=2\nFeatureType=\n") == 2);  // an empty value changes nothing
	CHECK(gridd_feature_type("FeatureType=1\nFeatureType=4") == 4);   // the last one wins
	CHECK(gridd_feature_type("FeatureTypes=4\n") == 0);
	// nvidia-settings compares strings: anything but "4", "2" (and a vGPU's "1") is unlicensed
	CHECK(gridd_feature_type("FeatureType=vCS\n") == 0);
	CHECK(gridd_feature_type("FeatureType=04\n") == 0);
	CHECK(gridd_feature_type("FeatureType=3\n") == 0);
	CHECK(feature_waits_for_reboot(2, 4));
	CHECK(feature_waits_for_reboot(4, 0));
	CHECK_FALSE(feature_waits_for_reboot(4, 4));
	CHECK_FALSE(feature_waits_for_reboot(1, 4));  // a vGPU's feature is its type's, whatever the file says
	CHECK_FALSE(feature_waits_for_reboot(0, 4));
	CHECK(feature_type_text(4) == "FeatureType=4 (NVIDIA Virtual Compute Server)");
	CHECK(feature_type_text(3) == "FeatureType=3");
}

TEST_CASE("a FeatureType the licensed feature keeps back waits for the host's reboot, without restarts", "[license]")
{
	LicensedMachine m;  // the first set applied
	m.licensed = 2;
	m.project("2026_02", "FeatureType=4\n", "token-2");
	for (int run = 0; run < 3; run++) {  // every later run says the same and restarts nothing
		auto r = m.run();
		CHECK(r.outcome == ReloadOutcome::RebootRequired);
		REQUIRE(r.held_back);
		CHECK(r.held_back->requested == 4);
		CHECK(r.held_back->licensed == 2);
		CHECK(r.restarts == 0);
		CHECK(m.units.calls.empty());
		CHECK(m.installed(GRIDD) == "FeatureType=1\n");
		CHECK(m.installed(TOKEN) == "token-1");
	}
	SECTION("a rotation that keeps the licensed FeatureType is applied as ever")
	{
		m.project("2026_03", "FeatureType=2\n", "token-3");
		CHECK(m.run().outcome == ReloadOutcome::Applied);
		CHECK(m.installed(TOKEN) == "token-3");
	}
	SECTION("after the host's reboot (nothing licensed on it yet) the files are applied")
	{
		m.licensed.reset();
		CHECK(m.run().outcome == ReloadOutcome::Applied);
		CHECK(m.installed(GRIDD) == "FeatureType=4\n");
	}
	SECTION("the machine's boot install keeps the installed files for nvidia-gridd's start")
	{
		LicenseReloader r(m.ctx, m.units, m.seams());
		auto rep = r.install_at_boot();
		REQUIRE(rep);
		CHECK(rep->outcome == ReloadOutcome::RebootRequired);
		CHECK(m.installed(GRIDD) == "FeatureType=1\n");
		// those are the applied ones: the next run, with the source back to them, has nothing to do
		m.licensed.reset();
		m.project("2026_03", "FeatureType=1\n", "token-1");
		CHECK(m.run().outcome == ReloadOutcome::Unchanged);
		CHECK(m.units.calls.empty());
	}
	SECTION("a rotation to a FeatureType that must wait, landing during the jitter of one that need not")
	{
		m.project("2026_03", "FeatureType=2\n", "token-3");
		m.units.calls.clear();
		m.sleep_hook = [&] { m.project("2026_04", "FeatureType=4\n", "token-4"); };
		auto r = m.run();
		CHECK(r.outcome == ReloadOutcome::RebootRequired);
		CHECK(m.units.calls.empty());
		CHECK(m.installed(TOKEN) == "token-1");
	}
}

TEST_CASE("a FeatureType change is applied when nothing, or a vGPU's feature, is licensed", "[license]")
{
	LicensedMachine m;
	SECTION("licensed as unlicensed (0): nothing to keep")
	{
		m.licensed = 0;
	}
	SECTION("a vGPU's license (1): its feature follows the vGPU type")
	{
		m.licensed = 1;
	}
	SECTION("no license seen on this boot of the host")
	{
		m.licensed.reset();
	}
	m.project("2026_02", "FeatureType=4\n", "token-2");
	CHECK(m.run().outcome == ReloadOutcome::Applied);
	CHECK(m.installed(GRIDD) == "FeatureType=4\n");
}

TEST_CASE("an interrupted restart is finished with the files nvidia-gridd ran with, never a FeatureType that must wait", "[license]")
{
	LicensedMachine m;  // token-1 applied
	m.licensed = 2;
	m.project("2026_02", "FeatureType=2\n", "token-2");
	m.after_stage = [&](std::string_view stage) {
		if (stage == "installed") {
			m.stop = true;
			m.units.refuses_start = true;
		}
	};
	REQUIRE(m.run().outcome == ReloadOutcome::Interrupted);  // token-2 installed, unverified
	m.after_stage = nullptr;
	m.stop = false;
	m.units.refuses_start = false;
	m.units.active = "inactive";                // stopped by the shutdown...
	m.units.start("nvidia-gridd.service", 1s);  // ...and started again at the next boot
	m.project("2026_03", "FeatureType=4\n", "token-3");
	m.units.calls.clear();
	auto r = m.run();
	CHECK(r.outcome == ReloadOutcome::RebootRequired);
	CHECK(m.units.count("start") == 1);              // nvidia-gridd is not left stopped
	CHECK(m.installed(GRIDD) == "FeatureType=1\n");  // the last applied files, not the held ones
	CHECK(m.installed(TOKEN) == "token-1");
	CHECK_FALSE(m.dir.exists("var/lib/unbounded-nvidia/license/restarting.state"));
}
