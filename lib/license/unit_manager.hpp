// The small slice of the service manager the license reloader needs, behind an interface (after
// sdbus-c++'s mockable bus): tests use a fake, the program uses sd-bus (sdbus_unit_manager.cpp).
#pragma once

#include "config.hpp"
#include "error.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace unbounded {

struct UnitStatus {
	std::string active_state;  // "active", "inactive", "failed", "activating", ...
	std::string sub_state;     // "running", "dead", ...
	std::uint32_t main_pid = 0;
	int kill_signal = 15;                 // KillSignal=
	bool send_sigkill = true;             // SendSIGKILL=
	std::string invocation_id;            // this run of the unit (32 hex digits), "" when it has none
	std::uint64_t active_enter_usec = 0;  // when it last became active (CLOCK_REALTIME), 0 when never
};

class UnitManager {
public:
	virtual ~UnitManager() = default;
	virtual Result<UnitStatus> status(const std::string &unit) = 0;
	// Queues a stop job (the unit's KillSignal, SIGTERM for nvidia-gridd with our drop-in) and waits
	// for it to finish, at most `timeout`.
	virtual Result<void> stop(const std::string &unit, Millis timeout) = 0;
	// Queues a start job and waits for it to finish, at most `timeout`.
	virtual Result<void> start(const std::string &unit, Millis timeout) = 0;
	// Whether the system is shutting down (the manager's SystemState is "stopping"): a unit that
	// went down or a start job refused then says nothing about the unit.
	virtual Result<bool> system_stopping() = 0;
};

// The real one, over the system bus (or $DBUS_SYSTEM_BUS_ADDRESS).
Result<std::unique_ptr<UnitManager>> connect_system_manager();

}  // namespace unbounded
