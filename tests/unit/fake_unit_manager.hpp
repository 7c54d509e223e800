// A fake service manager with one simulated nvidia-gridd: it records every call, and stop/start move
// the daemon's state as systemd would, so the reloader's decisions can be checked exactly.
#pragma once

#include "unit_manager.hpp"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace unbounded::test {

class FakeUnitManager final : public UnitManager {
public:
	std::string active = "active";
	std::uint32_t pid = 100;
	int kill_signal = 15;
	bool send_sigkill = false;
	bool ignores_sigterm = false;               // the daemon keeps running after the stop job times out
	std::function<bool()> stays_up = [] { return true; };  // decided at start, e.g. from the installed config
	std::vector<std::string> calls;
	std::set<std::uint32_t> alive{100};

	Result<UnitStatus> status(const std::string &unit) override
	{
		calls.push_back("status " + unit);
		return UnitStatus{active, active == "active" ? "running" : "dead", pid, kill_signal, send_sigkill};
	}
	Result<void> stop(const std::string &unit, Millis timeout) override
	{
		calls.push_back("stop " + unit + " signal=" + std::to_string(kill_signal) + (send_sigkill ? " sigkill" : " nosigkill"));
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
		calls.push_back("start " + unit);
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
	std::size_t count(const std::string &prefix) const
	{
		std::size_t n = 0;
		for (const auto &c : calls)
			n += c.rfind(prefix, 0) == 0;
		return n;
	}

private:
	std::uint32_t next_pid_ = 200;
};

}  // namespace unbounded::test
