// A service manager kept in a JSON file (unit_manager.hpp's open_file_manager): the tests' stand-in
// for PID 1 when the real binaries run on fake roots, so that verify's unit checks, refresh's start
// of what a failed setup held back and the license reloader's restart of nvidia-gridd (a unit with
// "exec": a real process, started, signalled and judged) are tested end to end without a booted
// machine.
#include "unit_manager.hpp"

#include "fs.hpp"
#include "proc_stat.hpp"
#include "unique_fd.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace unbounded {
namespace {

// When the process `pid` started (/proc/PID/stat's 22nd field, clock ticks since boot); none when
// there is no such process or it has exited and waits to be reaped by whoever adopted it. Recorded
// with the PID at the start, it tells the unit's process from another that got the PID since: that
// one is never signalled, nor taken for the unit's.
std::optional<std::uint64_t> started_at(std::uint32_t pid)
{
	auto st = read_proc_stat(pid);
	if (!st || st->exited())
		return std::nullopt;
	return st->start_time;
}

// The unit's main process as its entry records it ("main_pid", "main_start_time"), still running.
bool main_alive(const nlohmann::json &u)
{
	auto start = started_at(u.value("main_pid", std::uint32_t{0}));
	return start && *start == u.value("main_start_time", std::uint64_t{0});
}

// The daemon's side of spawn_detached(), between fork and exec: async-signal-safe calls only. Writes
// its PID to `report_fd`, and the errno when the exec fails.
[[noreturn]] void exec_detached(char *const argv[], int report_fd)
{
	::setsid();                                                 // its own session and process group, which stands for the unit's cgroup
	const int report = ::fcntl(report_fd, F_DUPFD_CLOEXEC, 3);  // out of the way of 0, 1 and 2
	const std::int32_t pid = ::getpid();
	(void)!::write(report, &pid, sizeof pid);
	// No O_CLOEXEC here: when 0, 1 or 2 were closed it lands on one of them, which must survive the exec.
	const int null = ::open("/dev/null", O_RDWR);
	if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0) {
		const std::int32_t err = errno;
		(void)!::write(report, &err, sizeof err);
		::_exit(127);
	}
	if (null > 2)
		::close(null);
	// Whatever else a caller let us inherit stays out of the daemon (ours are all O_CLOEXEC).
	::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	struct sigaction dfl = {};
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		::sigaction(sig, &dfl, nullptr);  // SIGKILL, SIGSTOP and libc's own refuse: nothing to reset
	sigset_t none;
	::sigemptyset(&none);
	::sigprocmask(SIG_SETMASK, &none, nullptr);
	(void)!::chdir("/");
	::execv(argv[0], argv);
	const std::int32_t err = errno;
	(void)!::write(report, &err, sizeof err);
	::_exit(127);
}

// Starts `args` as a service manager starts a daemon. Detached by a double fork: the middle process
// exits at once, so the daemon is init's (or a subreaper's) to reap, never a child of this short-lived
// program; stdin, stdout and stderr on /dev/null, so a caller that captures our output is not kept
// waiting until the daemon ends; default signal dispositions and an empty mask. Returns its PID; a
// failed exec is an error, as a start job's.
Result<pid_t> spawn_detached(const std::vector<std::string> &args)
{
	std::vector<char *> argv;
	for (const auto &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	int fds[2];
	if (::pipe2(fds, O_CLOEXEC) < 0)
		return fail(last_errno_error("Failed to create a pipe to start " + args[0]));
	UniqueFd report_read(fds[0]), report_write(fds[1]);
	const pid_t middle = ::fork();
	if (middle < 0)
		return fail(last_errno_error("Failed to fork to start " + args[0]));
	if (middle == 0) {
		if (::fork() == 0)
			exec_detached(argv.data(), report_write.get());
		::_exit(0);
	}
	report_write.reset();
	while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
	}
	// The daemon's PID, then end of file at its exec, or the exec's errno after the PID.
	std::int32_t msg[2] = {0, 0};
	std::size_t got = 0;
	while (got < sizeof msg) {
		const ssize_t n = ::read(report_read.get(), reinterpret_cast<char *>(msg) + got, sizeof msg - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += static_cast<std::size_t>(n);
	}
	if (got < sizeof msg[0])
		return fail(make_error("Failed to fork to start " + args[0]));
	if (got == sizeof msg)
		return fail(errno_error(msg[1], "Failed to execute " + args[0]));
	return static_cast<pid_t>(msg[0]);
}

// A unit's "exec": an absolute path and its arguments, as ExecStart= takes them.
Result<std::vector<std::string>> exec_of(const std::string &unit, const nlohmann::json &u)
{
	const auto &e = u["exec"];
	std::vector<std::string> args;
	if (e.is_array())
		for (const auto &a : e)
			if (a.is_string())
				args.push_back(a.get<std::string>());
	if (args.empty() || args.size() != e.size() || args[0].empty() || args[0][0] != '/')
		return fail(make_error(unit + ": \"exec\" must be a list of strings, an absolute path first"));
	return args;
}

class FileUnitManager final : public UnitManager {
public:
	explicit FileUnitManager(std::string path) : path_(std::move(path)) {}

	Result<UnitState> state(const std::string &unit) override
	{
		auto seen = look(unit);
		if (!seen)
			return fail(seen.error());
		return seen->first;
	}

	Result<void> start(const std::string &unit, Millis) override
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		note(*doc, "start " + unit);
		auto &u = (*doc)["units"][unit];
		std::string result = u.value("start_result", std::string("done"));
		std::string why;
		u["job_type"] = "";
		if (result == "done" && u.contains("exec") && !main_alive(u)) {  // a running unit's start job does nothing
			if (auto pid = spawn(unit, u); !pid) {
				result = "failed";
				why = ": " + pid.error().message;
				u["active_state"] = "failed";
				u["sub_state"] = "failed";
			}
		}
		if (result == "done") {
			u["active_state"] = "active";
			u["sub_state"] = "running";
			u["active_enter_usec"] = std::chrono::duration_cast<std::chrono::microseconds>(
							 std::chrono::system_clock::now().time_since_epoch())
							 .count();
		}
		if (auto r = save(*doc); !r)
			return fail(r.error());
		if (result != "done")
			return fail(make_error("Start job of " + unit + " finished with result '" + result + "'" + why));
		return {};
	}

	// The unit's KillSignal= to its main process's group (the stand-in for its cgroup: KillMode=
	// control-group, systemd's default, signals every process of the unit), once. Never a SIGKILL
	// after it, whatever "send_sigkill" says: the fake only reports that setting. The job ends at
	// once; as after systemd's, the caller waits for the old process to be gone.
	Result<void> stop(const std::string &unit, Millis) override
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		auto &u = (*doc)["units"][unit];
		const int sig = u.value("kill_signal", SIGTERM);
		note(*doc, "stop " + unit + " signal " + std::to_string(sig));
		if (main_alive(u)) {
			const auto pid = static_cast<pid_t>(u.value("main_pid", std::uint32_t{0}));
			if (::kill(-pid, sig) < 0)
				::kill(pid, sig);  // it left the group it was started in
		}
		u["active_state"] = "inactive";
		u["sub_state"] = "dead";
		u["main_pid"] = 0;
		u.erase("main_start_time");
		return save(*doc);
	}

	Result<UnitStatus> status(const std::string &unit) override
	{
		auto seen = look(unit);
		if (!seen)
			return fail(seen.error());
		const auto &[s, u] = *seen;
		UnitStatus st;
		st.active_state = s.active_state;
		st.sub_state = s.sub_state;
		st.active_enter_usec = s.active_enter_usec;
		st.main_pid = u.value("main_pid", std::uint32_t{0});
		st.kill_signal = u.value("kill_signal", SIGTERM);
		// The fake stands for a unit as our drop-in leaves nvidia-gridd's (SendSIGKILL=no) unless a
		// test says otherwise, to see the reloader refuse one that could be SIGKILLed.
		st.send_sigkill = u.value("send_sigkill", false);
		return st;
	}

	Result<bool> system_stopping() override { return false; }

private:
	Result<nlohmann::json> load()
	{
		auto text = fs::read_file(path_, 1u << 20);
		if (!text)
			return fail(text.error());
		auto doc = nlohmann::json::parse(*text, nullptr, false);
		if (doc.is_discarded() || !doc.is_object())
			return fail(make_error(path_ + " is not a JSON object"));
		if (!doc.contains("units"))
			doc["units"] = nlohmann::json::object();
		return doc;
	}
	static void note(nlohmann::json &doc, const std::string &call) { doc["calls"].push_back(call); }

	// One look at `unit` (a "state" call): its state and its entry ({} when it has none).
	Result<std::pair<UnitState, nlohmann::json>> look(const std::string &unit)
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		note(*doc, "state " + unit);
		UnitState s;
		s.load_state = "not-found";
		s.active_state = "inactive";
		s.sub_state = "dead";
		auto &units = (*doc)["units"];
		nlohmann::json entry = nlohmann::json::object();
		if (units.contains(unit)) {
			auto &u = units[unit];
			notice_exit(u);
			s.load_state = u.value("load_state", std::string("loaded"));
			s.active_state = u.value("active_state", std::string("inactive"));
			s.sub_state = u.value("sub_state", std::string(s.active_state == "active" ? "running" : "dead"));
			s.active_enter_usec = u.value("active_enter_usec", std::uint64_t{0});
			s.job_type = u.value("job_type", std::string());
			entry = u;
		}
		if (auto r = save(*doc); !r)
			return fail(r.error());
		return std::pair{s, std::move(entry)};
	}

	// A running unit with "exec" whose main process is gone failed, as systemd records a daemon that
	// exited on its own (its exit status is not ours to learn: init reaps it).
	static void notice_exit(nlohmann::json &u)
	{
		if (!u.contains("exec") || u.value("main_pid", std::uint32_t{0}) == 0 || main_alive(u))
			return;
		u["active_state"] = "failed";
		u["sub_state"] = "failed";
		u["main_pid"] = 0;
		u.erase("main_start_time");
	}

	Result<pid_t> spawn(const std::string &unit, nlohmann::json &u) const
	{
		// A file that says what to execute is trusted only as a unit file is: written by root (or
		// whoever runs us) alone.
		UniqueFd file(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
		if (!file)
			return fail(last_errno_error("Failed to open " + path_));
		if (auto t = fs::check_trusted(file.get(), path_, /*directory=*/false); !t)
			return fail(t.error());
		auto args = exec_of(unit, u);
		if (!args)
			return fail(args.error());
		auto pid = spawn_detached(*args);
		if (!pid)
			return fail(pid.error());
		u["main_pid"] = *pid;
		// 0 when it is gone already: then it is no longer the unit's (notice_exit).
		u["main_start_time"] = started_at(static_cast<std::uint32_t>(*pid)).value_or(0);
		return *pid;
	}
	Result<void> save(const nlohmann::json &doc)
	{
		auto w = fs::write_file_atomic(path_, doc.dump(1) + "\n");
		if (!w)
			return fail(w.error());
		return {};
	}

	std::string path_;
};

}  // namespace

Result<std::unique_ptr<UnitManager>> open_file_manager(const std::string &path)
{
	return std::unique_ptr<UnitManager>(std::make_unique<FileUnitManager>(path));
}

bool has_unit_manager(const Context &ctx)
{
	const char *fake = std::getenv("UNBOUNDED_NVIDIA_FAKE_UNITS");
	return ctx.root.empty() || ctx.root == "/" || (fake && *fake);
}

Result<std::unique_ptr<UnitManager>> unit_manager_for(const Context &ctx)
{
	if (ctx.root.empty() || ctx.root == "/")  // "/" is this system, as for every path (fs::root_path)
		return connect_system_manager();
	if (!has_unit_manager(ctx))
		return std::unique_ptr<UnitManager>();
	return open_file_manager(std::getenv("UNBOUNDED_NVIDIA_FAKE_UNITS"));
}

std::unique_ptr<UnitManager> unit_manager_or_why(const Context &ctx, std::string &why)
{
	auto m = unit_manager_for(ctx);
	if (!m) {
		why = m.error().message;
		return nullptr;
	}
	if (!*m)
		why = "the units of a --root tree are not this system's";
	return std::move(*m);
}

}  // namespace unbounded
