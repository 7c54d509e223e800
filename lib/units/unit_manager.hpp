// The small slice of the service manager our programs need, behind an interface (after sdbus-c++'s
// mockable bus): the license reloader restarts nvidia-gridd; setup records which units its failure
// held back, refresh starts them once the root is ready, verify reads the states of the units it
// protects. Tests use a fake (tests/unit/fake_unit_manager.hpp, or file_unit_manager.cpp through the
// real binaries); the programs use sd-bus (sdbus_unit_manager.cpp).
#pragma once

#include "config.hpp"
#include "context.hpp"
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

// What any unit (not only a service) is: whether it exists, its state, and the job queued for it.
struct UnitState {
	std::string load_state;    // "loaded", "not-found", "masked", ...
	std::string active_state;  // "active", "inactive", "failed", "activating", ...
	std::string sub_state;
	std::uint64_t active_enter_usec = 0;  // when it last became active (CLOCK_REALTIME), 0 when never
	std::string job_type;                 // the queued job's type ("start", "stop", ...), "" when none

	bool installed() const { return load_state != "not-found" && !load_state.empty(); }
};

class UnitManager {
public:
	virtual ~UnitManager() = default;
	virtual Result<UnitStatus> status(const std::string &unit) = 0;
	virtual Result<UnitState> state(const std::string &unit) = 0;
	// Queues a stop job (the unit's KillSignal, SIGTERM for nvidia-gridd with our drop-in) and waits
	// for it to finish, at most `timeout`.
	virtual Result<void> stop(const std::string &unit, Millis timeout) = 0;
	// Queues a start job and waits for it to finish, at most `timeout`; a timeout of 0 only queues it.
	virtual Result<void> start(const std::string &unit, Millis timeout) = 0;
	// Whether the system is shutting down (the manager's SystemState is "stopping"): a unit that
	// went down or a start job refused then says nothing about the unit.
	virtual Result<bool> system_stopping() = 0;
};

// The real one, over PID 1's private socket as root, else the system bus (or
// $DBUS_SYSTEM_BUS_ADDRESS). libsystemd is loaded when this is called, not when the program starts:
// setup's boot path never pays for it.
Result<std::unique_ptr<UnitManager>> connect_system_manager();

// The service manager of a running machine, from the host: its system bus, reached through
// systemd-machined (as `systemctl -M MACHINE` does).
Result<std::unique_ptr<UnitManager>> connect_machine_manager(const std::string &machine);

// A service manager kept in a JSON file, for tests through the real binaries on fake roots:
// {"units": {"containerd.service": {"load_state": "loaded", "active_state": "inactive",
// "active_enter_usec": 0, "job_type": "start", "start_result": "done"}}, "calls": ["start ..."]}.
// Every call is appended to "calls": "state UNIT" (status() too), "start UNIT", "stop UNIT signal N".
// A start makes the unit active (or fails with its start_result); a stop makes it inactive.
// A unit may run a real process, for the license reloader's restart of nvidia-gridd:
//   "exec": ["/path", "arg", ...]  a start (of a unit whose process is not running) spawns it
//                                 detached (own session, stdio on /dev/null) and records
//   "main_pid", "main_start_time"  its PID and start time (/proc/PID/stat); a running unit whose
//                                 process has exited reads as "failed" with main_pid 0
//   "kill_signal": 15             KillSignal=: what a stop sends, once, to the process's group
//                                 (then inactive, main_pid 0; never a SIGKILL after it)
//   "send_sigkill": false         SendSIGKILL=, only reported (false: our drop-in's setting)
Result<std::unique_ptr<UnitManager>> open_file_manager(const std::string &path);

// The service manager of the machine `ctx` describes: the real one (no root, or "/"), or none for a
// --root tree (an offline image's units are not this system's), except with
// $UNBOUNDED_NVIDIA_FAKE_UNITS, the tests' file (open_file_manager), which only a --root run reads.
// nullptr: no manager to ask.
Result<std::unique_ptr<UnitManager>> unit_manager_for(const Context &ctx);
// Whether unit_manager_for() gives one: the live system, or a --root run with the tests' file.
bool has_unit_manager(const Context &ctx);
// unit_manager_for(), or nullptr with why there is none in `why` (a --root tree, no bus), for a
// caller that only says so.
std::unique_ptr<UnitManager> unit_manager_or_why(const Context &ctx, std::string &why);

}  // namespace unbounded
