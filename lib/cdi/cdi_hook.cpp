#include "cdi_hook.hpp"

#include "bounded_parse.hpp"
#include "discovery_cache.hpp"
#include "fs.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace unbounded {
namespace {

constexpr const char *MEMO = "cdi-hook.json";
constexpr std::size_t MAX_HELP = 64 * 1024;
constexpr auto HELP_TIMEOUT = std::chrono::seconds(2);

bool plain_command(std::string_view c)
{
	if (c.empty() || c.size() > 64)
		return false;
	for (char ch : c)
		if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_'))
			return false;
	return true;
}

// Reads what is in the pipe now, without waiting: false at end of file or past MAX_HELP.
bool drain(int fd, std::string &out, bool &eof)
{
	char buf[4096];
	while (out.size() <= MAX_HELP) {
		ssize_t n = ::read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return true;  // EAGAIN: nothing more now
		if (n == 0) {
			eof = true;
			return false;
		}
		out.append(buf, static_cast<std::size_t>(n));
	}
	return false;
}

// Runs `path --help` with nothing inherited but a plain environment: its stdout (at most MAX_HELP
// bytes) when it exits 0 within HELP_TIMEOUT.
// The hook runs in a process group of its own, and the whole group is killed when the probe ends,
// however it ended: anything the hook started must not outlive setup as root. It is judged by its
// exit status and what it printed by then, not by its stdout closing, which a child it left behind
// may keep open. The group is killed while the hook is still an unreaped zombie, so its ID (the
// group's) cannot have been reused by then.
std::optional<std::string> run_help(const std::string &path)
{
	int fds[2];
	if (::pipe2(fds, O_CLOEXEC) < 0)
		return std::nullopt;
	UniqueFd rd(fds[0]), wr(fds[1]);
	(void)::fcntl(rd.get(), F_SETFL, O_NONBLOCK);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	char *argv[] = {const_cast<char *>(path.c_str()), const_cast<char *>("--help"), nullptr};
	char *envp[] = {const_cast<char *>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), const_cast<char *>("LANG=C"), nullptr};
	pid_t pid = -1;
	const int r = ::posix_spawn(&pid, path.c_str(), &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	wr.reset();
	if (r != 0)
		return std::nullopt;

	std::string out;
	bool eof = false, exited = false;
	const auto deadline = std::chrono::steady_clock::now() + HELP_TIMEOUT;
	while (out.size() <= MAX_HELP) {
		siginfo_t si{};
		// WNOWAIT: seen to have exited, not yet reaped (see above).
		if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
			exited = true;
			if (!eof)
				(void)drain(rd.get(), out, eof);  // what it wrote before it exited is in the pipe
			break;
		}
		const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
		if (left <= 0)
			break;
		if (!eof) {
			pollfd p{rd.get(), POLLIN, 0};
			// Short waits: the exit is only seen by asking, and the pipe may stay open past it.
			if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 10))) > 0 && !drain(rd.get(), out, eof) && !eof)
				break;  // past MAX_HELP
		} else {
			std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
		}
	}
	::kill(-pid, SIGKILL);  // the group: the hook if it is still running, and whatever it started
	int status = 0;
	while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	if (!exited || out.size() > MAX_HELP || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return std::nullopt;
	return out;
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
				h.from_memo = true;
				return h;
			}
		}
	}
	auto help = run_help(real_path);
	if (!help) {
		h.warning = display + " --help did not list its commands (not exit 0 within 2 s), writing no hooks";
		return h;
	}
	h.commands = parse_hook_help(*help);
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
