// decide_driver(): which driver may be live, case by case.
#include "refresh_policy.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

const std::string V1 = "535.104.05", V2 = "550.54.15";

DriverWitnesses witnesses(std::optional<std::string> module, std::optional<std::string> staged,
			  std::optional<std::string> live, bool refresh = true)
{
	DriverWitnesses w;
	w.module = module;
	w.module_unknown_reason = "/proc/driver/nvidia/version does not exist here";
	w.staged = staged;
	w.staged_where = staged ? "/run/host-nvidia/0/libcuda.so." + *staged : "";
	w.staging_error = staged ? "" : "Driver version mismatch: libcuda.so.550.54.15 but libnvidia-ml.so.535.104.05";
	w.live = [live] { return live; };
	w.keep_when_unsure = refresh;
	return w;
}

}  // namespace

TEST_CASE("module, staging and live root agree: build (which keeps an unchanged root)")
{
	CHECK(decide_driver(witnesses(V1, V1, V1)).action == DriverAction::Build);
	CHECK(decide_driver(witnesses(V2, V2, V1)).action == DriverAction::Build);
	CHECK(decide_driver(witnesses(V1, V1, std::nullopt)).action == DriverAction::Build);
}

TEST_CASE("the live root is read only when the decision needs it")
{
	bool asked = false;
	DriverWitnesses w = witnesses(V1, V1, V1);
	w.live = [&] {
		asked = true;
		return std::optional<std::string>(V1);
	};
	CHECK(decide_driver(w).action == DriverAction::Build);
	CHECK_FALSE(asked);
}

TEST_CASE("userspace upgraded, old module loaded: the live copy keeps serving")
{
	auto d = decide_driver(witnesses(V1, V2, V1));
	CHECK(d.action == DriverAction::KeepPendingHostReboot);
	CHECK(d.message == "Host staged driver " + V2 + " but the loaded kernel module is " + V1 + ": keeping driver root " + V1 +
				   " until the host reboots");
	CHECK(std::string(outcome_name(d.action)) == "pending-host-reboot");
	// setup run by hand decides the same: the module is the authority, not a guess
	CHECK(decide_driver(witnesses(V1, V2, V1, false)).action == DriverAction::KeepPendingHostReboot);
}

TEST_CASE("module and staging disagree with no live root of the module's version: fail, naming both")
{
	for (auto live : {std::optional<std::string>(), std::optional<std::string>(V2)}) {
		auto d = decide_driver(witnesses(V1, V2, live));
		CHECK(d.action == DriverAction::Fail);
		CHECK(d.message == "Driver version mismatch: kernel module " + V1 +
					   " (/proc/driver/nvidia/version) but userspace /run/host-nvidia/0/libcuda.so." + V2);
	}
}

TEST_CASE("staging mid-upgrade: a refresh keeps a root that matches the module, setup fails")
{
	auto d = decide_driver(witnesses(V1, std::nullopt, V1));
	CHECK(d.action == DriverAction::KeepStagingInconsistent);
	CHECK(d.message.ends_with(": keeping driver root " + V1 + ", trying again on the next change"));
	CHECK(decide_driver(witnesses(std::nullopt, std::nullopt, V1)).action == DriverAction::KeepStagingInconsistent);
	// a root the module has moved past is no reason to keep it
	CHECK(decide_driver(witnesses(V2, std::nullopt, V1)).action == DriverAction::Fail);
	CHECK(decide_driver(witnesses(V1, std::nullopt, std::nullopt)).action == DriverAction::Fail);
	auto s = decide_driver(witnesses(V1, std::nullopt, V1, false));
	CHECK(s.action == DriverAction::Fail);
	CHECK(s.message.starts_with("Driver version mismatch"));
}

TEST_CASE("staging gone: keep a working root, not ready")
{
	DriverWitnesses w = witnesses(V1, std::nullopt, V1);
	w.staging_present = false;
	w.staging_error = "No staging mounts under /run/host-nvidia";
	CHECK(decide_driver(w).action == DriverAction::KeepStagingGone);
	w.live = [] { return std::optional<std::string>(); };
	auto d = decide_driver(w);
	CHECK(d.action == DriverAction::Fail);
	CHECK(d.message == "No staging mounts under /run/host-nvidia");
}

TEST_CASE("module unknown: setup trusts staging, a refresh never swaps versions blind")
{
	auto boot = decide_driver(witnesses(std::nullopt, V1, std::nullopt, false));
	CHECK(boot.action == DriverAction::Build);
	CHECK(boot.warning.starts_with("Kernel module version unknown"));
	CHECK(decide_driver(witnesses(std::nullopt, V2, V1, false)).action == DriverAction::Build);
	auto r = decide_driver(witnesses(std::nullopt, V2, V1));
	CHECK(r.action == DriverAction::KeepPendingHostReboot);
	CHECK(r.message.find("kernel module version is unknown") != std::string::npos);
	// same version: files may have changed, rebuild; no root: build
	CHECK(decide_driver(witnesses(std::nullopt, V1, V1)).action == DriverAction::Build);
	CHECK(decide_driver(witnesses(std::nullopt, V2, std::nullopt)).action == DriverAction::Build);
}
