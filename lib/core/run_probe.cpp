// Running a program of the machine's to ask it what it is: see run_probe.hpp.
#include "run_probe.hpp"

#include "unique_fd.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace unbounded {
namespace {

// Reads what is in the pipe now, without waiting; false once it is at its end.
bool drain(int fd, std::string &to, std::size_t keep, bool keep_tail)
{
	char buf[4096];
	for (;;) {
		const ssize_t n = ::read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return true;  // EAGAIN: nothing more now
		if (n == 0)
			return false;
		to.append(buf, static_cast<std::size_t>(n));
		if (to.size() > keep) {
			if (!keep_tail)
				return true;  // past the bound: the caller stops
			to.erase(0, to.size() - keep);
		}
	}
}

constexpr uid_t NOBODY = 65534;

// Every descriptor past stderr closed at exec; one by one where close_range() is missing (a kernel
// before 5.11, an emulator).
void cloexec_from_3()
{
	if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	rlimit lim{};
	const long top = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? static_cast<long>(std::min<rlim_t>(lim.rlim_cur, 1 << 20)) : 1024;
	for (int fd = 3; fd < top; fd++)
		(void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// In the child, between fork and exec: only calls that are safe there. Its error goes to the
// status pipe as errno and a step, then it exits. Every descriptor but 0-2 closes at exec (a caller's
// open directory would lead out of a chroot). Chrooted into a machine root, the program runs as
// nobody, with no way to gain privileges: root in a chroot is not confined, and the root may be an
// image verify was pointed at, not the machine it runs on.
[[noreturn]] void child(const Probe &p, char *const *argv, char *const *envp, int in, int out, int err, int status)
{
	const char *step = "setpgid";
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, nullptr);
	const bool jail = !p.chroot.empty() && p.chroot != "/";
	cloexec_from_3();
	if (::setpgid(0, 0) == 0 && (step = "dup2", ::dup2(in, 0) >= 0 && ::dup2(out, 1) >= 0 && ::dup2(err, 2) >= 0) &&
	    (step = "chroot", !jail || (::chroot(p.chroot.c_str()) == 0 && ::chdir("/") == 0)) &&
	    (step = "setuid", !jail || (::setgroups(0, nullptr) == 0 && ::setresgid(NOBODY, NOBODY, NOBODY) == 0 &&
					::setresuid(NOBODY, NOBODY, NOBODY) == 0)) &&
	    (step = "prctl", ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)) {
		step = "execve";
		::execve(p.path.c_str(), argv, envp);
	}
	const int e = errno;
	(void)!::write(status, &e, sizeof e);
	(void)!::write(status, step, std::strlen(step));
	::_exit(127);
}

// Reads its output until it exits, the time is up or stdout passes its bound: whether it exited.
bool collect(pid_t pid, int out_fd, int err_fd, const Probe &p, ProbeResult &r)
{
	bool out_open = true, err_open = true;
	const auto deadline = std::chrono::steady_clock::now() + p.timeout;
	for (;;) {
		siginfo_t si{};
		// WNOWAIT: seen to have exited, not yet reaped (see run_program).
		if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
			// What it wrote before it exited is in the pipes.
			if (out_open)
				drain(out_fd, r.out, p.max_out, false);
			if (err_open)
				drain(err_fd, r.err, p.max_err, true);
			return true;
		}
		const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
		if (left <= 0) {
			r.timed_out = true;
			return false;
		}
		pollfd fds[2] = {{out_open ? out_fd : -1, POLLIN, 0}, {err_open ? err_fd : -1, POLLIN, 0}};
		// Short waits: the exit is only seen by asking, and the pipes may stay open past it.
		if (out_open || err_open) {
			if (::poll(fds, 2, static_cast<int>(std::min<long long>(left, 10))) > 0) {
				if (out_open && fds[0].revents)
					out_open = drain(out_fd, r.out, p.max_out, false);
				if (err_open && fds[1].revents)
					err_open = drain(err_fd, r.err, p.max_err, true);
			}
		} else {
			std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
		}
		if (r.out.size() > p.max_out)
			return false;
	}
}

}  // namespace

std::string ProbeResult::last_err_line() const
{
	std::string_view e = err;
	while (!e.empty() && (e.back() == '\n' || e.back() == '\r' || e.back() == ' '))
		e.remove_suffix(1);
	const auto nl = e.rfind('\n');
	return std::string(nl == std::string_view::npos ? e : e.substr(nl + 1));
}

// Judged by its exit status and what it wrote by then, not by its pipes closing, which a child it
// left behind may keep open. The group is killed while the program is still an unreaped zombie, so
// its ID (the group's) cannot have been reused by then.
ProbeResult run_program(const Probe &p)
{
	ProbeResult r;
	int o[2], e[2], s[2];
	if (::pipe2(o, O_CLOEXEC) < 0 || ::pipe2(e, O_CLOEXEC) < 0 || ::pipe2(s, O_CLOEXEC) < 0) {
		r.error = std::string("pipe: ") + std::strerror(errno);
		return r;
	}
	UniqueFd out_r(o[0]), out_w(o[1]), err_r(e[0]), err_w(e[1]), st_r(s[0]), st_w(s[1]);
	// This system's /dev/null, opened before any chroot: a machine root may have none.
	const UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
	if (!null) {
		r.error = std::string("/dev/null: ") + std::strerror(errno);
		return r;
	}
	std::vector<std::string> args{p.path};
	args.insert(args.end(), p.args.begin(), p.args.end());
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	char *envp[] = {const_cast<char *>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), const_cast<char *>("LANG=C"), nullptr};
	const pid_t pid = ::fork();
	if (pid < 0) {
		r.error = std::string("fork: ") + std::strerror(errno);
		return r;
	}
	if (pid == 0)
		child(p, argv.data(), envp, null.get(), out_w.get(), err_w.get(), st_w.get());
	out_w.reset(), err_w.reset(), st_w.reset();
	for (int fd : {out_r.get(), err_r.get()})
		(void)::fcntl(fd, F_SETFL, O_NONBLOCK);

	const bool exited = collect(pid, out_r.get(), err_r.get(), p, r);
	r.too_big = r.out.size() > p.max_out;
	::kill(-pid, SIGKILL);  // the group: the program if it is still running, and whatever it started
	::kill(pid, SIGKILL);   // and the program itself, if it failed before its setpgid
	int status = 0;
	while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	int child_errno = 0;
	char step[64] = {};
	if (::read(st_r.get(), &child_errno, sizeof child_errno) == sizeof child_errno) {
		(void)!::read(st_r.get(), step, sizeof step - 1);
		r.error = std::string(step) + ": " + std::strerror(child_errno);
		return r;
	}
	if (exited && !r.too_big && WIFEXITED(status)) {
		r.ran = true;
		r.status = WEXITSTATUS(status);
	} else if (exited && WIFSIGNALED(status)) {
		r.error = std::string("killed by signal ") + std::to_string(WTERMSIG(status));
	}
	return r;
}

}  // namespace unbounded
