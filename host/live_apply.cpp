#include "live_apply.hpp"

#include "confined_open.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "mounts.hpp"
#include "unique_fd.hpp"
#include "unit_manager.hpp"

#include <algorithm>
#include <sys/sysmacros.h>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <linux/magic.h>
#include <memory>
#include <optional>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>
#include <utility>

namespace unbounded::host {
namespace {

constexpr const char *REFRESH_UNIT = "unbounded-nvidia-refresh.service";
// The refresh unit's own TimeoutStartSec= is three settle limits and builds (about 21 minutes).
constexpr Millis REFRESH_TIMEOUT{1'500'000};
constexpr std::uint64_t RELOAD_TIMEOUT_USEC = 120'000'000;  // a daemon-reload of a large host takes seconds
constexpr const char *MACHINED = "org.freedesktop.machine1";
constexpr const char *MACHINED_PATH = "/org/freedesktop/machine1";
constexpr const char *MACHINED_MANAGER = "org.freedesktop.machine1.Manager";
constexpr const char *SYSTEMD = "org.freedesktop.systemd1";

struct BusCloser {
	void operator()(sd_bus *b) const { sd_bus_flush_close_unref(b); }
};
struct MessageUnref {
	void operator()(sd_bus_message *m) const { sd_bus_message_unref(m); }
};
using BusPtr = std::unique_ptr<sd_bus, BusCloser>;
using MessagePtr = std::unique_ptr<sd_bus_message, MessageUnref>;

class BusError {
public:
	~BusError() { sd_bus_error_free(&e_); }
	sd_bus_error *get() { return &e_; }
	bool is(const char *name) const { return sd_bus_error_has_name(&e_, name); }
	std::string text(int r) const { return e_.message ? std::string(e_.message) : errno_string(-r); }

private:
	sd_bus_error e_ = {};
};

struct MachineInfo {
	std::uint32_t leader = 0;
	std::string state;  // "opening", "running", "closing"
	std::string unit;
};

Result<std::string> string_property(sd_bus *bus, const char *dest, const std::string &path, const char *iface, const char *name)
{
	BusError err;
	char *value = nullptr;
	const int r = sd_bus_get_property_string(bus, dest, path.c_str(), iface, name, err.get(), &value);
	if (r < 0)
		return fail(make_error(std::string("Failed to read ") + name + " of " + path + ": " + err.text(r), EXIT_NOT_READY, -r));
	std::string s = value;
	std::free(value);
	return s;
}

// What systemd-machined knows of MACHINE; nullopt when it has no machine of that name.
Result<std::optional<MachineInfo>> find_machine(sd_bus *bus, const std::string &name)
{
	BusError err;
	sd_bus_message *raw = nullptr;
	int r = sd_bus_call_method(bus, MACHINED, MACHINED_PATH, MACHINED_MANAGER, "GetMachine", err.get(), &raw, "s", name.c_str());
	MessagePtr reply(raw);
	if (r < 0 && err.is("org.freedesktop.machine1.NoSuchMachine"))
		return std::optional<MachineInfo>();
	if (r < 0)
		return fail(make_error("Failed to ask systemd-machined for " + name + ": " + err.text(r), EXIT_NOT_READY, -r));
	const char *path = nullptr;
	if ((r = sd_bus_message_read(reply.get(), "o", &path)) < 0)
		return fail(errno_error(-r, "Failed to read systemd-machined's answer for " + name));
	MachineInfo m;
	BusError perr;
	const std::string object = path;
	if ((r = sd_bus_get_property_trivial(bus, MACHINED, path, "org.freedesktop.machine1.Machine", "Leader", perr.get(), 'u', &m.leader)) < 0)
		return fail(make_error("Failed to read the leader of machine " + name + ": " + perr.text(r), EXIT_NOT_READY, -r));
	auto state = string_property(bus, MACHINED, object, "org.freedesktop.machine1.Machine", "State");
	auto unit = state ? string_property(bus, MACHINED, object, "org.freedesktop.machine1.Machine", "Unit") : fail(state.error());
	if (!unit)
		return fail(unit.error());
	m.state = *state;
	m.unit = *unit;
	return std::optional<MachineInfo>(m);
}

// The leader's UID map is the identity only without a user namespace (what machined checks).
Result<bool> user_namespaced(int proc)
{
	auto map = fs::read_file_at(proc, "uid_map", "the machine leader's uid_map", 4096);
	if (!map)
		return fail(map.error());
	std::vector<std::string> words;  // split at blanks, tabs and newlines
	std::string word;
	for (char c : *map + " ")
		if (c != ' ' && c != '\t' && c != '\n')
			word += c;
		else if (!word.empty())
			words.push_back(std::exchange(word, {}));
	return words != std::vector<std::string>{"0", "0", "4294967295"};
}

bool unified_cgroups()
{
	struct statfs s {};
	return ::statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC;
}

// The leader's /proc directory, opened once: every later look at the machine goes through this fd,
// so a leader that exits meanwhile fails those looks instead of a reused PID answering them. machined
// is asked again after the open: the fd is the machine's leader, not a process that took its PID.
Result<UniqueFd> open_leader(sd_bus *bus, const std::string &machine, std::uint32_t leader)
{
	const std::string path = "/proc/" + std::to_string(leader);
	UniqueFd proc(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (!proc)
		return fail(last_errno_error("Failed to open " + path + ", the leader of " + machine));
	auto again = find_machine(bus, machine);
	if (!again)
		return fail(again.error());
	if (!*again || (*again)->leader != leader)
		return fail(make_error(machine + " stopped or restarted while binds looked at it; run it again"));
	return proc;
}

// What is mounted at each of our destinations in the machine (its mountinfo, paths as the machine sees
// them), compared with `wanted`'s sources. A mount point that mountinfo lists but that cannot be reached
// by its path (a later mount over a parent hides it, say a tmpfs on /tmp) is left alone: nothing could
// be unmounted there by its path, and the machine does not see it.
Result<std::map<std::string, LiveMount>> machine_mounts(int proc, const std::vector<BindSpec> &wanted)
{
	auto table = MountTable::load_if([](const std::string &target) { return owned_destination(target); }, "/proc/self/fd/" + std::to_string(proc) + "/mountinfo");
	if (!table)
		return fail(table.error());
	UniqueFd root(::openat(proc, "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (!root)
		return fail(last_errno_error("Failed to open the machine's root"));
	std::map<std::string, LiveMount> out;
	for (const auto &e : table->entries()) {
		// Resolved in the machine's root, never through a link of its own: the machine writes its /run.
		auto fd = open_confined(root.get(), e.target, {.confinement = Confinement::InRoot, .flags = O_PATH, .follow_last = false});
		if (!fd)
			continue;
		LiveMount m;
		struct stat inside {
		}, host{};
		struct statvfs vfs {};
		const auto bind = std::find_if(wanted.begin(), wanted.end(), [&](const BindSpec &b) { return b.dest == e.target; });
		if (bind != wanted.end() && ::fstat(fd->get(), &inside) == 0 && ::stat(bind->source.c_str(), &host) == 0)
			m.same_source = inside.st_dev == host.st_dev && inside.st_ino == host.st_ino;
		if (::fstatvfs(fd->get(), &vfs) == 0)
			m.read_only = (vfs.f_flag & ST_RDONLY) != 0;
		out[e.target] = m;  // the last of stacked mounts is the one seen
	}
	return out;
}

// Unmounts `dest` in the leader's mount namespace (lazily), then removes the empty file or directory
// nspawn or machined made to mount on. A forked child enters the namespace: setns() into a mount
// namespace needs a process that shares its file system state with no thread.
Result<void> unmount_in(int proc, const std::string &dest)
{
	UniqueFd ns(::openat(proc, "ns/mnt", O_RDONLY | O_CLOEXEC));
	if (!ns)
		return fail(last_errno_error("Failed to open the machine's mount namespace"));
	const char *path = dest.c_str();
	const pid_t pid = ::fork();
	if (pid < 0)
		return fail(last_errno_error("Failed to fork"));
	if (pid == 0) {
		if (::setns(ns.get(), CLONE_NEWNS) < 0)
			::_exit(255);
		if (::umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) < 0)
			::_exit(errno & 0x7f);
		struct stat st {};
		if (::lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
			(void)::unlink(path);
		else if (::lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			(void)::rmdir(path);
		::_exit(0);
	}
	int status = 0;
	pid_t r;
	while ((r = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
	}
	if (r < 0)
		return fail(last_errno_error("Failed to wait for the unmount of " + dest));
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 255)
		return fail(make_error("Failed to enter the machine's mount namespace to unmount " + dest));
	if (WEXITSTATUS(status) != 0)
		return fail(errno_error(WEXITSTATUS(status), "Failed to unmount " + dest + " in the machine"));
	return {};
}

// `machinectl bind [--read-only] --mkdir MACHINE SOURCE DEST`.
Result<void> bind_into(sd_bus *bus, const std::string &machine, const BindSpec &b)
{
	BusError err;
	sd_bus_message *raw = nullptr;
	const int r = sd_bus_call_method(bus, MACHINED, MACHINED_PATH, MACHINED_MANAGER, "BindMountMachine", err.get(), &raw, "sssbb", machine.c_str(),
					 b.source.c_str(), b.dest.c_str(), static_cast<int>(b.read_only), 1);
	MessagePtr reply(raw);
	if (r < 0)
		return fail(make_error("Failed to bind " + b.source + " at " + b.dest + " in " + machine + ": " + err.text(r), EXIT_NOT_READY, -r));
	return {};
}

Result<void> daemon_reload(sd_bus *bus)
{
	sd_bus_message *raw = nullptr;
	int r = sd_bus_message_new_method_call(bus, &raw, SYSTEMD, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "Reload");
	MessagePtr call(raw);
	BusError err;
	sd_bus_message *reply = nullptr;
	if (r >= 0)
		r = sd_bus_call(bus, call.get(), RELOAD_TIMEOUT_USEC, err.get(), &reply);
	MessagePtr answer(reply);
	if (r < 0)
		return fail(make_error("Failed to reload systemd: " + err.text(r), EXIT_NOT_READY, -r));
	return {};
}

// `unit`'s object path ("" when the manager does not know it; a property read of it then fails).
std::string unit_object(sd_bus *bus, const std::string &unit)
{
	BusError err;
	sd_bus_message *raw = nullptr;
	int r = sd_bus_call_method(bus, SYSTEMD, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "GetUnit", err.get(), &raw, "s", unit.c_str());
	MessagePtr reply(raw);
	const char *path = nullptr;
	if (r < 0 || sd_bus_message_read(reply.get(), "o", &path) < 0 || !path)
		return "";
	return path;
}

// The device nodes and classes `unit`'s device cgroup allows now, as systemd reports them.
Result<std::vector<std::string>> device_allow_of(sd_bus *bus, const std::string &unit)
{
	const std::string path = unit_object(bus, unit);
	if (path.empty())
		return fail(make_error("Failed to find " + unit + " in the host's systemd"));
	sd_bus_message *praw = nullptr;
	BusError perr;
	int r = sd_bus_get_property(bus, SYSTEMD, path.c_str(), "org.freedesktop.systemd1.Service", "DeviceAllow", perr.get(), &praw, "a(ss)");
	MessagePtr prop(praw);
	if (r < 0 || (r = sd_bus_message_enter_container(prop.get(), 'a', "(ss)")) < 0)
		return fail(make_error("Failed to read DeviceAllow= of " + unit + ": " + perr.text(r), EXIT_NOT_READY, -r));
	std::vector<std::string> out;
	const char *node = nullptr, *access = nullptr;
	while ((r = sd_bus_message_read(prop.get(), "(ss)", &node, &access)) > 0)
		out.emplace_back(node);
	if (r < 0)
		return fail(errno_error(-r, "Failed to read DeviceAllow= of " + unit));
	return out;
}

// A DeviceAllow= node or class of ours: an NVIDIA or DRM node, or an NVIDIA class.
bool our_device(const std::string &entry)
{
	return entry.starts_with("/dev/nvidia") || entry.starts_with("char-nvidia") || entry.starts_with("/dev/dri") || entry == "/dev/gdrdrv";
}

// Ours of DeviceAllow= entries ("/dev/nvidia0" as systemd reports them, "/dev/nvidia0 rwm" as binds
// writes them), by node or class, sorted.
std::vector<std::string> our_devices(std::vector<std::string> entries)
{
	for (auto &e : entries)
		e = e.substr(0, e.find(' '));
	std::erase_if(entries, [](const std::string &e) { return !our_device(e); });
	std::sort(entries.begin(), entries.end());
	entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
	return entries;
}

// The processes of `unit`'s cgroup and every cgroup below it (the machine's pods included).
std::vector<pid_t> unit_processes(const std::string &cgroup)
{
	std::vector<pid_t> pids;
	std::vector<std::string> dirs{"/sys/fs/cgroup" + cgroup};
	for (std::size_t i = 0; i < dirs.size() && dirs.size() < 100'000; i++) {
		auto procs = fs::read_file(dirs[i] + "/cgroup.procs", 4u << 20);
		for (std::size_t pos = 0; procs && pos < procs->size();) {
			const auto nl = procs->find('\n', pos);
			pids.push_back(static_cast<pid_t>(std::atol(procs->substr(pos, nl - pos).c_str())));
			pos = nl == std::string::npos ? procs->size() : nl + 1;
		}
		auto dir = fs::open_dir(dirs[i]);
		auto names = dir ? fs::list_dir(dir->get(), dirs[i]) : fail(dir.error());
		for (const auto &n : names ? *names : std::vector<std::string>{})
			if (struct stat st{}; ::fstatat(dir->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
				dirs.push_back(dirs[i] + "/" + n);
	}
	return pids;
}

struct Probe {
	UniqueFd proc;                       // the leader's /proc directory
	std::unique_ptr<UnitManager> units;  // the machine's service manager
	std::vector<std::string> not_live;
	bool devices_differ = false;  // the unit's DeviceAllow= (ours) is not what binds gives
};

// What the running machine must be for its change to be applied live, asked of machined, the host's
// systemd and the machine's own (its bus), before anything is written.
Result<void> probe_machine(Probe &p, sd_bus *bus, const MachineFiles &f, const HostBinds &b, const MachineInfo &m)
{
	if (m.unit != f.unit)
		p.not_live.push_back(f.machine + " runs in " + m.unit + ", not " + f.unit + ": give that unit with --unit");
	auto userns = user_namespaced(p.proc.get());
	if (!userns)
		return fail(userns.error());
	if (*userns)
		p.not_live.push_back(f.machine + " runs in a user namespace: systemd-machined binds into none");
	const auto changed = diff_settings(f.base_text, b.nspawn);
	for (const auto &l : changed.missing)
		if (l.section == "Exec")
			p.not_live.push_back("[Exec] " + l.text() + ": nspawn applies it when the machine starts");
	for (const auto &l : changed.superfluous)
		if (l.section == "Exec")
			p.not_live.push_back("[Exec] " + l.text() + " removed: nspawn applies it when the machine starts");
	auto units = connect_machine_manager(f.machine);
	auto refresh = units ? (*units)->state(REFRESH_UNIT) : fail(units.error());
	auto setup = refresh ? (*units)->state("unbounded-nvidia-setup.service") : fail(refresh.error());
	if (!setup)
		return fail(make_error(setup.error().message + " (binds --apply asks the machine's systemd over its bus)"));
	p.units = std::move(*units);
	// add_settings() gives each setting once.
	const bool off = std::any_of(b.settings.begin(), b.settings.end(), [](const auto &s) { return s.first == "unbounded-nvidia.enabled" && s.second == "no"; });
	if (off && setup->installed())
		p.not_live.push_back("the kill switch (enabled=no): " + f.machine + "'s generator reads it at boot");
	if (!off && !refresh->installed())
		p.not_live.push_back(f.machine + " has no " + REFRESH_UNIT + " (it booted switched off or without a GPU): its generator decides at boot");
	auto allowed = device_allow_of(bus, f.unit);
	if (!allowed)
		return fail(allowed.error());
	const auto have = our_devices(*allowed), want = our_devices(b.device_allow);
	p.devices_differ = have != want;
	if (p.devices_differ && !unified_cgroups())
		p.not_live.push_back("DeviceAllow= on the legacy cgroup hierarchy: a running machine's device cgroup keeps its own list");
	std::vector<std::string> gone;
	std::set_difference(have.begin(), have.end(), want.begin(), want.end(), std::back_inserter(gone));
	std::erase_if(gone, [](const std::string &e) { return !e.starts_with("/dev/"); });
	if (gone.empty())
		return {};
	auto cgroup = string_property(bus, SYSTEMD, unit_object(bus, f.unit), "org.freedesktop.systemd1.Service", "ControlGroup");
	const auto pids = cgroup ? unit_processes(*cgroup) : std::vector<pid_t>{};
	for (const auto &node : gone)
		if (auto pid = process_holding(pids, node))
			p.not_live.push_back(node + " is open in " + f.machine + " (PID " + std::to_string(*pid) +
					     "): the GPU would stay with it; drain its pods first");
	return {};
}

// Whether the unit runs (a machine machined does not know, started with --register=no).
Result<bool> unit_runs(const std::string &unit)
{
	auto units = connect_system_manager();
	auto state = units ? (*units)->state(unit) : fail(units.error());
	if (!state)
		return fail(state.error());
	return unit_running(state->active_state);
}

}  // namespace

// A process of the machine (a pod's CUDA program, say) that holds `node` open: removing the node's
// bind and permission would not take the GPU from it. Attributes as cached (AT_STATX_DONT_SYNC): a
// file the machine opened on a file system that hangs must not hang the host's tool.
std::optional<pid_t> process_holding(const std::vector<pid_t> &pids, const std::string &node)
{
	struct stat want {};
	if (::stat(node.c_str(), &want) != 0 || !S_ISCHR(want.st_mode))
		return std::nullopt;
	for (const pid_t pid : pids) {
		const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
		auto dir = fs::open_dir(fds);
		auto names = dir ? fs::list_dir(dir->get(), fds) : fail(dir.error());
		for (const auto &n : names ? *names : std::vector<std::string>{}) {
			struct statx st {};
			if (::statx(dir->get(), n.c_str(), AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0 && S_ISCHR(st.stx_mode) &&
			    ::makedev(st.stx_rdev_major, st.stx_rdev_minor) == want.st_rdev)
				return pid;
		}
	}
	return std::nullopt;
}

LivePlan plan_live(const std::vector<BindSpec> &wanted, const std::map<std::string, LiveMount> &mounted)
{
	LivePlan p;
	for (const auto &b : wanted) {
		const auto m = mounted.find(b.dest);
		if (m == mounted.end())
			p.add.push_back(b);
		else if (!m->second.same_source || m->second.read_only != b.read_only)
			p.replace.push_back(b);
	}
	for (const auto &[dest, m] : mounted)
		if (std::none_of(wanted.begin(), wanted.end(), [&](const BindSpec &b) { return b.dest == dest; }))
			p.remove.push_back(dest);
	return p;
}

namespace {

// Binds what the machine lacks; one that fails takes back those made before it.
Result<std::vector<std::string>> add_binds(sd_bus *bus, const std::string &machine, int proc, const LivePlan &plan)
{
	std::vector<std::string> added;
	for (const auto &b : plan.add) {
		if (auto r = bind_into(bus, machine, b); !r) {
			for (const auto &dest : added)
				if (auto u = unmount_in(proc, dest); !u)
					return fail(make_error(r.error().message + "; and taking back " + dest + " failed: " + u.error().message));
			return fail(r.error());
		}
		added.push_back(b.dest);
	}
	return added;
}

// The rest of `plan` once the device cgroup follows the files: mounts from another source replaced,
// ours no longer given unmounted. A failure is reported with what was done before it.
Result<void> replace_and_remove(sd_bus *bus, const std::string &machine, int proc, const LivePlan &plan, std::vector<std::string> &done)
{
	for (const auto &b : plan.replace) {
		auto r = unmount_in(proc, b.dest);
		if (r)
			r = bind_into(bus, machine, b);
		if (!r)
			return r;
		done.push_back("rebound " + b.source + " at " + b.dest + (b.read_only ? " read-only" : ""));
	}
	for (const auto &dest : plan.remove) {
		if (auto r = unmount_in(proc, dest); !r)
			return r;
		done.push_back("unmounted " + dest);
	}
	return {};
}

// After the daemon-reload: the unit's device cgroup allows exactly our nodes that binds gives.
Result<void> check_device_allow(sd_bus *bus, const MachineFiles &f, const HostBinds &b)
{
	auto allowed = device_allow_of(bus, f.unit);
	if (!allowed)
		return fail(allowed.error());
	const auto have = our_devices(*allowed), want = our_devices(b.device_allow);
	for (const auto &d : want)
		if (!std::binary_search(have.begin(), have.end(), d))
			return fail(make_error(f.unit + " does not allow " + d + " after the daemon-reload (DeviceAllow= overridden by another drop-in?)"));
	for (const auto &d : have)
		if (!std::binary_search(want.begin(), want.end(), d))
			return fail(make_error(f.unit + " still allows " + d + " after the daemon-reload (another drop-in's DeviceAllow=?)"));
	return {};
}

LiveResult failed_with(LiveResult &res, const Error &e)
{
	res.state = "failed";
	res.error = e.message;
	return res;
}

// With nothing standing in the way: the files written, then the machine changed to match them.
LiveResult apply_probed(LiveResult &res, Probe &p, sd_bus *bus, const MachineFiles &f, const HostBinds &b, const Commit &commit)
{
	const auto failed = [&](const Error &e) { return failed_with(res, e); };
	auto written = commit();
	if (!written)
		return failed(written.error());
	res.written = *written;
	std::vector<BindSpec> wanted;
	for (const auto &l : b.nspawn)
		if (auto spec = bind_spec(l))
			wanted.push_back(*spec);
	auto mounts = machine_mounts(p.proc.get(), wanted);
	if (!mounts)
		return failed(mounts.error());
	const auto plan = plan_live(wanted, *mounts);
	const bool reload = p.devices_differ || std::find(res.written.begin(), res.written.end(), f.dropin) != res.written.end();
	res.state = "applied";
	if (res.written.empty() && plan.empty() && !reload)
		return res;
	// Additions first, while the device cgroup keeps its old list: a new node is seen a moment before
	// it may be opened, and a failure here leaves the machine as it was.
	auto added = add_binds(bus, f.machine, p.proc.get(), plan);
	if (!added)
		return failed(added.error());
	if (reload) {
		auto reloaded = daemon_reload(bus);
		auto checked = reloaded ? check_device_allow(bus, f, b) : reloaded;
		if (!checked) {
			for (const auto &dest : *added)
				(void)unmount_in(p.proc.get(), dest);
			return failed(checked.error());
		}
	}
	for (const auto &a : plan.add)
		res.done.push_back("bound " + a.source + " at " + a.dest + (a.read_only ? " read-only" : ""));
	if (reload)
		res.done.push_back("reloaded systemd: " + f.unit + "'s DeviceAllow= as the drop-in says");
	if (auto changed = replace_and_remove(bus, f.machine, p.proc.get(), plan, res.done); !changed)
		return failed(changed.error());
	auto started = p.units->start(REFRESH_UNIT, REFRESH_TIMEOUT);
	res.refresh = started ? "done" : started.error().message;
	if (!started)
		return failed(make_error("The machine's " + std::string(REFRESH_UNIT) + " did not succeed: " + started.error().message));
	return res;
}

}  // namespace

LiveResult apply_live(const MachineFiles &f, const HostBinds &b, const Commit &commit)
{
	LiveResult res;
	const auto failed = [&](const Error &e) { return failed_with(res, e); };
	sd_bus *raw = nullptr;
	const int r = sd_bus_open_system(&raw);
	BusPtr bus(raw);
	if (r < 0)
		return failed(errno_error(-r, "Failed to connect to the system bus"));
	auto machine = find_machine(bus.get(), f.machine);
	if (!machine)
		return failed(machine.error());
	if (!*machine || (*machine)->state == "closing") {
		auto runs = unit_runs(f.unit);
		if (!runs)
			return failed(runs.error());
		if (*runs) {
			res.state = "not-live";
			res.not_live.push_back(f.unit + " runs, but systemd-machined knows no machine " + f.machine + " (started with --register=no?)");
			return res;
		}
		auto written = commit();
		if (!written)
			return failed(written.error());
		res.written = *written;
		res.state = "not-running";
		return res;
	}
	Probe p;
	auto proc = open_leader(bus.get(), f.machine, (*machine)->leader);
	if (!proc)
		return failed(proc.error());
	p.proc = std::move(*proc);
	if (auto probed = probe_machine(p, bus.get(), f, b, **machine); !probed)
		return failed(probed.error());
	if (!p.not_live.empty()) {
		res.state = "not-live";
		res.not_live = p.not_live;
		return res;
	}
	return apply_probed(res, p, bus.get(), f, b, commit);
}

}  // namespace unbounded::host
