// Running a program of the machine's to ask it what it is (nvidia-cdi-hook --help, containerd
// --version): see run_probe.hpp.
#include "run_probe.hpp"

#include "unique_fd.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace unbounded {
namespace {

// Reads what is in the pipe now, without waiting: false at end of file or past max_bytes.
bool drain(int fd, std::string &out, bool &eof, std::size_t max_bytes)
{
	char buf[4096];
	while (out.size() <= max_bytes) {
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

}  // namespace

// The program runs in a process group of its own, and the whole group is killed when the probe ends,
// however it ended: anything it started must not outlive us as root. It is judged by its
// exit status and what it printed by then, not by its stdout closing, which a child it left behind
// may keep open. The group is killed while the program is still an unreaped zombie, so its ID (the
// group's) cannot have been reused by then.
std::optional<std::string> run_probe(const std::string &path, const char *arg, Millis timeout, std::size_t max_bytes)
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
	char *argv[] = {const_cast<char *>(path.c_str()), const_cast<char *>(arg), nullptr};
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
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	while (out.size() <= max_bytes) {
		siginfo_t si{};
		// WNOWAIT: seen to have exited, not yet reaped (see above).
		if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
			exited = true;
			if (!eof)
				(void)drain(rd.get(), out, eof, max_bytes);  // what it wrote before it exited is in the pipe
			break;
		}
		const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
		if (left <= 0)
			break;
		if (!eof) {
			pollfd p{rd.get(), POLLIN, 0};
			// Short waits: the exit is only seen by asking, and the pipe may stay open past it.
			if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 10))) > 0 && !drain(rd.get(), out, eof, max_bytes) && !eof)
				break;  // past max_bytes
		} else {
			std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
		}
	}
	::kill(-pid, SIGKILL);  // the group: the program if it is still running, and whatever it started
	int status = 0;
	while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	if (!exited || out.size() > max_bytes || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return std::nullopt;
	return out;
}

}  // namespace unbounded
