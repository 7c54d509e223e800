// A fake service manager with one simulated nvidia-gridd: it records every call, and stop/start move
// the daemon's state as systemd would, so the reloader's decisions can be checked exactly.
#pragma once

#include "unit_manager.hpp"

#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace unbounded::test {

class FakeUnitManager final : public UnitManager {
public:
	std::string active = "active";
	std::uint32_t pid = 100;
	int kill_signal = 15;
	bool send_sigkill = false;
	bool ignores_sigterm = false;                          // the daemon keeps running after the stop job times out
	std::function<bool()> stays_up = [] { return true; };  // decided at start, e.g. from the installed config
	// decided at start, like stays_up: a daemon that starts, then dies this long after its start
	std::function<std::optional<Millis>()> crashes_after = [] { return std::optional<Millis>(); };
	bool refuses_start = false;    // start jobs fail (as during a shutdown)
	bool killed_at_start = false;  // the caller is killed (throws) before its start job is queued
	bool stopping = false;         // the manager's SystemState is "stopping" (a shutdown)
	Millis clock{0};               // advanced by the reloader's waits (the test's seams)
	std::vector<std::string> calls;
	std::set<std::uint32_t> alive{100};

	Result<UnitStatus> status(const std::string &unit) override
	{
		calls.push_back("status " + unit);
		if (active == "active" && crash_at_ && clock >= *crash_at_) {
			alive.erase(pid);
			pid = 0;
			active = "failed";
		}
		char id[33];
		std::snprintf(id, sizeof(id), "%032x", pid);  // a run of the daemon: one per PID here
		return UnitStatus{active, active == "active" ? "running" : "dead", pid, kill_signal, send_sigkill,
				  active == "active" ? std::string(id) : std::string(), 0};
	}
	Result<UnitState> state(const std::string &unit) override
	{
		calls.push_back("state " + unit);
		return UnitState{"loaded", active, active == "active" ? "running" : "dead", 0, ""};
	}
	Result<void> stop(const std::string &unit, Millis timeout) override
	{
		calls.push_back("stop " + unit);
		if (ignores_sigterm) {
			active = "failed";
			return fail(make_error("Timed out after " + format_duration(timeout) + " waiting for the stop job of " + unit,
					       EXIT_NOT_READY, ETIMEDOUT));
		}
		alive.erase(pid);
		pid = 0;
		active = "inactive";
		return {};
	}
	Result<void> start(const std::string &unit, Millis) override
	{
		if (killed_at_start)
			throw std::runtime_error("SIGKILL before the start job of " + unit);
		calls.push_back("start " + unit);
		if (refuses_start)
			return fail(make_error("Transaction for " + unit + "/start is destructive (shutdown.target has 'start' job queued)"));
		crash_at_.reset();
		if (auto after = crashes_after())
			crash_at_ = clock + *after;
		if (!stays_up()) {
			active = "failed";
			pid = 0;
			return {};
		}
		pid = next_pid_++;
		alive.insert(pid);
		active = "active";
		return {};
	}
	Result<bool> system_stopping() override
	{
		calls.push_back("system-state");
		return stopping;
	}
	std::size_t count(const std::string &prefix) const
	{
		std::size_t n = 0;
		for (const auto &c : calls)
			n += c.rfind(prefix, 0) == 0;
		return n;
	}

private:
	std::uint32_t next_pid_ = 200;
	std::optional<Millis> crash_at_;  // when the daemon started last dies
};

}  // namespace unbounded::test
