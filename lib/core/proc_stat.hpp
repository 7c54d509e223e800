// What /proc/PID/stat says of a process: its state (is the unit's process still running).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace unbounded {

struct ProcStat {
	char state = '?';  // field 3; '?' when the line could not be parsed

	// Exited and waiting to be reaped (Z), or dead (X): no longer a running process.
	bool exited() const { return state == 'Z' || state == 'X'; }
};

// One /proc/PID/stat line. The command name (field 2) may hold anything, ')' and spaces included,
// so the fields are read after its last ')'.
ProcStat parse_proc_stat(std::string_view line);

// /proc/`pid`/stat read and parsed; none when there is no such process (or pid is 0).
std::optional<ProcStat> read_proc_stat(std::uint32_t pid);

}  // namespace unbounded
