#include "log.hpp"

#include <cctype>
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
bool keep_off_terminal = false;  // a terminal's stderr mixes into the stdout we answer on
bool tee_stderr = false;         // journal and stderr both (also_journal)
std::string machine_root;        // without a trailing '/'; empty: the live system

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
	struct stat st = {};
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

void keep_stderr_off_terminal()
{
	if (!::isatty(STDERR_FILENO))
		return;
	keep_off_terminal = true;
	to_journal = true;
}

void also_journal()
{
	to_journal = true;
	tee_stderr = true;
}

void set_machine_root(std::string_view root)
{
	machine_root = root;
	while (!machine_root.empty() && machine_root.back() == '/')
		machine_root.pop_back();
}

std::string npd_line(std::string_view text)
{
	std::string line = printable(machine_view(text));
	if (line.size() > 80) {
		std::size_t cut = 77;
		while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80)
			cut--;
		line = line.substr(0, cut) + "...";
	}
	return line;
}

std::string machine_view(std::string_view text)
{
	if (machine_root.empty())
		return std::string(text);
	std::string out;
	out.reserve(text.size());
	for (std::size_t pos = 0;;) {
		const std::size_t hit = text.find(machine_root, pos);
		if (hit == std::string_view::npos) {
			out.append(text.substr(pos));
			return out;
		}
		const std::size_t end = hit + machine_root.size();
		// Only the root as a whole path prefix: "/tmp/r/x" or "/tmp/r" itself, never "/tmp/r2".
		auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '/'; };
		const bool starts = hit == 0 || !name_char(text[hit - 1]);
		const bool ends = end == text.size() || text[end] == '/' || !name_char(text[end]);
		out.append(text.substr(pos, hit - pos));
		if (starts && ends)
			out.append(end < text.size() && text[end] == '/' ? "" : "/");
		else
			out.append(machine_root);
		pos = end;
	}
}
bool journal_connected() { return to_journal; }

void emit(Level level, std::string_view message, const Fields &fields)
{
	if (static_cast<int>(level) > static_cast<int>(max_level))
		return;

	if (to_journal) {
		std::vector<std::pair<std::string, std::string>> items;
		items.reserve(fields.size() + 4);
		items.emplace_back("MESSAGE", machine_view(message));
		items.emplace_back("PRIORITY", std::to_string(static_cast<int>(level)));
		items.emplace_back("SYSLOG_IDENTIFIER", program);
		items.emplace_back("SYSLOG_PID", std::to_string(::getpid()));
		for (const auto &f : fields)
			items.emplace_back(f.name, machine_view(f.value));
		// Journald gone: stderr, unless it is the terminal the answer goes to (which carries
		// what matters).
		const bool sent = sd::journal_send(items);
		if ((sent && !tee_stderr) || keep_off_terminal)
			return;
	}
	std::string line = program;
	line += ": ";
	line += printable(machine_view(message));  // one line, whatever bytes a file name brought in
	line += '\n';
	(void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace unbounded::log
