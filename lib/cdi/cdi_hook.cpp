#include "cdi_hook.hpp"

#include "bounded_parse.hpp"
#include "discovery_cache.hpp"
#include "fs.hpp"
#include "run_probe.hpp"

#include <algorithm>
#include <cctype>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {
namespace {

constexpr const char *MEMO = "cdi-hook.json";
constexpr std::size_t MAX_HELP = 64 * 1024;
constexpr Millis HELP_TIMEOUT{2000};

bool plain_command(std::string_view c)
{
	if (c.empty() || c.size() > 64)
		return false;
	for (char ch : c)
		if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_'))
			return false;
	return true;
}

}  // namespace

std::set<std::string> parse_hook_help(std::string_view help)
{
	std::set<std::string> out;
	bool in_commands = false;
	while (!help.empty()) {
		auto nl = help.find('\n');
		std::string_view line = help.substr(0, nl);
		help = nl == std::string_view::npos ? std::string_view() : help.substr(nl + 1);
		if (line.starts_with("COMMANDS:")) {
			in_commands = true;
			continue;
		}
		if (!in_commands)
			continue;
		if (line.empty() || (line.front() != ' ' && line.front() != '\t'))
			break;  // the next section
		auto start = line.find_first_not_of(" \t");
		if (start == std::string_view::npos)
			continue;  // a line of blanks names nothing (substr(npos) would throw out of setup)
		auto end = line.find_first_of(" \t,", start);
		std::string_view name = line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
		if (plain_command(name))
			out.insert(std::string(name));
	}
	out.erase("help");
	return out;
}

HookCommands hook_commands(const std::string &real_path, const std::string &display, const std::string &run_dir)
{
	HookCommands h;
	struct stat st = {};
	if (::stat(real_path.c_str(), &st) < 0) {
		h.warning = errno_error(errno, "Failed to stat " + display).message + ", writing no hooks";
		return h;
	}
	const std::string id = identity_key(st);  // as the discovery memo keys a file
	auto dir = fs::open_dir(run_dir);
	if (dir) {
		// Believed only when nobody else could have written it (as the discovery memo).
		auto read = fs::read_trusted_at(dir->get(), run_dir, MEMO, MEMO, 64 * 1024);
		if (read && check_json_bounded(read->text, MEMO)) {
			auto j = nlohmann::json::parse(read->text, nullptr, false);
			if (j.is_object() && j.value("identity", "") == id && j.contains("commands") && j["commands"].is_array()) {
				for (const auto &c : j["commands"])
					if (c.is_string() && plain_command(c.get<std::string>()))
						h.commands.insert(c.get<std::string>());
				return h;
			}
		}
	}
	const ProbeResult help = run_program(Probe{real_path, {"--help"}, "", HELP_TIMEOUT, MAX_HELP, 0});  // on this filesystem
	if (!help.ok()) {
		h.warning = display + " --help did not list its commands (not exit 0 within 2 s), writing no hooks";
		return h;
	}
	h.commands = parse_hook_help(help.out);
	if (h.commands.empty())
		h.warning = display + " --help listed no commands, writing no hooks";
	h.memo = nlohmann::json{{"identity", id}, {"commands", h.commands}}.dump() + "\n";
	return h;
}

void save_hook_memo(int run_dir_fd, const std::string &display, const std::string &memo)
{
	(void)fs::write_file_atomic_at(run_dir_fd, MEMO, fs::join(display, MEMO), memo,
				       {.mode = 0644, .fsync = false, .skip_if_unchanged = true});
}

}  // namespace unbounded
