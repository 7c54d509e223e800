// The small slice of the service manager our programs need, behind an interface (after sdbus-c++'s
// mockable bus): the license reloader restarts nvidia-gridd; setup records which units its failure
// held back, refresh starts them once the root is ready, verify reads the states of the units it
// protects. The programs use sd-bus (sdbus_unit_manager.cpp); tests use a fake
// (tests/unit/fake_unit_manager.hpp), or, through the real binaries, a fake PID 1 on a fake root's
// private socket (tests/fixtures/fake_systemd.cpp).
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

// Whether a unit in ActiveState `s` runs or is on its way to.
inline bool unit_running(const std::string &s) { return s == "active" || s == "activating" || s == "reloading"; }

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

// The service manager whose private socket is `socket_fd` (an O_PATH or socket fd), as systemctl
// talks to PID 1 over /run/systemd/private.
Result<std::unique_ptr<UnitManager>> connect_manager_socket(int socket_fd);

// The service manager of the machine `ctx` describes: the real one (no root, or "/"); for a --root
// tree, one listening on the tree's own run/systemd/private (the tests' stand-in for PID 1; found
// without following a symlink, root's, never this system's own socket), else none: an offline
// image's units are not this system's. nullptr: no manager to ask.
Result<std::unique_ptr<UnitManager>> unit_manager_for(const Context &ctx);
// Whether unit_manager_for() may give one: the live system, or a --root tree with a manager's socket
// that passes those checks.
bool has_unit_manager(const Context &ctx);
// unit_manager_for(), or nullptr with why there is none in `why` (a --root tree, no bus), for a
// caller that only says so.
std::unique_ptr<UnitManager> unit_manager_or_why(const Context &ctx, std::string &why);

}  // namespace unbounded
