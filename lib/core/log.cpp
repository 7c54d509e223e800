#include "log.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include "bounded_parse.hpp"
#include "sd_protocols.hpp"

#include <unistd.h>

namespace unbounded::log {
namespace {

std::string program = "unbounded-nvidia";
Level max_level = Level::Info;
bool to_journal = false;

// systemd sets JOURNAL_STREAM=<dev>:<ino> for the stderr/stdout it connects to journald; when our
// stderr is still that stream, structured logging keeps the fields instead of flattening them.
bool stderr_is_journal_stream()
{
	const char *e = std::getenv("JOURNAL_STREAM");
	if (!e)
		return false;
	unsigned long long dev = 0, ino = 0;
	if (std::sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	struct stat st{};
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

}  // namespace

void init(std::string_view program_name, bool allow_journal)
{
	program = program_name;
	to_journal = allow_journal && stderr_is_journal_stream();
	if (const char *lvl = std::getenv("UNBOUNDED_NVIDIA_LOG_LEVEL"); lvl && std::string_view(lvl) == "debug")
		max_level = Level::Debug;
}

void set_max_level(Level level) { max_level = level; }
bool journal_connected() { return to_journal; }

void emit(Level level, std::string_view message, const Fields &fields)
{
	if (static_cast<int>(level) > static_cast<int>(max_level))
		return;

	if (to_journal) {
		std::vector<std::pair<std::string, std::string>> items;
		items.reserve(fields.size() + 4);
		items.emplace_back("MESSAGE", std::string(message));
		items.emplace_back("PRIORITY", std::to_string(static_cast<int>(level)));
		items.emplace_back("SYSLOG_IDENTIFIER", program);
		items.emplace_back("SYSLOG_PID", std::to_string(::getpid()));
		for (const auto &f : fields)
			items.emplace_back(f.name, f.value);
		if (sd::journal_send(items))
			return;
		// fall through to stderr if journald is gone
	}
	std::string line = program;
	line += ": ";
	line += printable(message);  // one line, whatever bytes a file name brought in
	line += '\n';
	(void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace unbounded::log
