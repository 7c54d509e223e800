// Program-level logging in systemd style. Library code returns errors and does not log above debug;
// mains and command implementations log. When stderr is connected to the journal (JOURNAL_STREAM
// matches, as systemd sets it for services) messages go to the journal with structured fields;
// otherwise one line per message goes to stderr.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded::log {

enum class Level : int {
	Error = 3,
	Warning = 4,
	Notice = 5,
	Info = 6,
	Debug = 7,
};

struct Field {
	std::string name;  // journal field name, e.g. "UNBOUNDED_NVIDIA_DRIVER_VERSION"
	std::string value;
};
using Fields = std::vector<Field>;

void init(std::string_view program_name, bool allow_journal);
// A command that answers on stdout (--json, --npd) run on a terminal, as `machinectl shell` gives it
// one: stdout and stderr are the same pty, and a log line would land inside the answer. Messages go
// to the journal instead (dropped when there is none: the answer carries the problems).
void keep_stderr_off_terminal();
// A --json run started as a unit of its own whose stderr is not the journal: the host's reconcile
// loop's `systemd-run -M MACHINE --wait --pipe ... verify --json`, whose stderr goes back to the
// caller. Messages go to the machine's journal too, with their fields, so it holds what each run
// found; stderr keeps them for the caller.
void also_journal();
bool journal_connected();

void emit(Level level, std::string_view message, const Fields &fields = {});

// Under --root, messages name paths as the machine sees them: "/tmp/r/run/host-nvidia/0" is said as
// "/run/host-nvidia/0". Errors are made deep down from the real paths they failed on; this is
// where every message leaves (the log, the JSON report, the NPD line), so it is translated here.
void set_machine_root(std::string_view root);
std::string machine_view(std::string_view text);
// The one line node-problem-detector's custom plugin protocol shows as a condition's message, from
// `verify --npd` and `license-reload --npd` alike: as the machine sees paths, escaped (a path from a
// spec may hold any byte), at most 80 characters, never cut inside a UTF-8 character.
std::string npd_line(std::string_view text);

inline void error(std::string_view m, const Fields &f = {}) { emit(Level::Error, m, f); }
inline void warning(std::string_view m, const Fields &f = {}) { emit(Level::Warning, m, f); }
inline void notice(std::string_view m, const Fields &f = {}) { emit(Level::Notice, m, f); }
inline void info(std::string_view m, const Fields &f = {}) { emit(Level::Info, m, f); }
inline void debug(std::string_view m, const Fields &f = {}) { emit(Level::Debug, m, f); }

}  // namespace unbounded::log
