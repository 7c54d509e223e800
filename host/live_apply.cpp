#include "live_apply.hpp"

#include "confined_open.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "mounts.hpp"
#include "unique_fd.hpp"
#include "unit_manager.hpp"

#include <algorithm>
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

namespace unbounded::host {
namespace {

constexpr const char *REFRESH_UNIT = "unbounded-nvidia-refresh.service";
constexpr Millis REFRESH_TIMEOUT{300'000};
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
bool user_namespaced(std::uint32_t leader)
{
	auto map = fs::read_file("/proc/" + std::to_string(leader) + "/uid_map", 4096);
	if (!map)
		return true;
	std::vector<std::string> words;
	for (std::size_t i = 0; i < map->size();) {
		const auto start = map->find_first_not_of(" \t\n", i);
		if (start == std::string::npos)
			break;
		const auto end = map->find_first_of(" \t\n", start);
		words.push_back(map->substr(start, end - start));
		i = end == std::string::npos ? map->size() : end;
	}
	return words != std::vector<std::string>{"0", "0", "4294967295"};
}

bool unified_cgroups()
{
	struct statfs s {};
	return ::statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC;
}

// The mount points of ours in the leader's mount namespace, as its /proc/PID/mountinfo lists them
// (paths as the machine sees them; the parser skips every other mount as it reads).
Result<std::vector<std::string>> our_mount_points(std::uint32_t leader)
{
	auto table = MountTable::load_if([](const std::string &target) { return owned_destination(target); },
					 "/proc/" + std::to_string(leader) + "/mountinfo");
	if (!table)
		return fail(table.error());
	std::vector<std::string> out;
	for (const auto &e : table->entries())
		if (std::find(out.begin(), out.end(), e.target) == out.end())
			out.push_back(e.target);
	return out;
}

// What is mounted at each of our destinations in the machine, compared with `wanted`'s sources.
Result<std::map<std::string, LiveMount>> machine_mounts(std::uint32_t leader, const std::vector<BindSpec> &wanted)
{
	auto points = our_mount_points(leader);
	if (!points)
		return fail(points.error());
	const std::string root_path = "/proc/" + std::to_string(leader) + "/root";
	UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (!root)
		return fail(last_errno_error("Failed to open " + root_path));
	std::map<std::string, LiveMount> out;
	for (const auto &point : *points) {
		LiveMount m;
		// Resolved in the machine's root, never through a link of its own: the machine writes its /run.
		auto fd = open_confined(root.get(), point, {.confinement = Confinement::InRoot, .flags = O_PATH, .follow_last = false});
		struct stat inside {
		}, host{};
		struct statvfs vfs {};
		const auto bind = std::find_if(wanted.begin(), wanted.end(), [&](const BindSpec &b) { return b.dest == point; });
		if (fd && bind != wanted.end() && ::fstat(fd->get(), &inside) == 0 && ::stat(bind->source.c_str(), &host) == 0)
			m.same_source = inside.st_dev == host.st_dev && inside.st_ino == host.st_ino;
		if (fd && ::fstatvfs(fd->get(), &vfs) == 0)
			m.read_only = (vfs.f_flag & ST_RDONLY) != 0;
		out[point] = m;
	}
	return out;
}

// Unmounts `dest` in the leader's mount namespace (lazily: a pod may hold a node open), then removes
// the empty file or directory nspawn or machined made to mount on. A forked child enters the namespace:
// setns() into a mount namespace needs a process that shares its file system state with no thread.
Result<void> unmount_in(std::uint32_t leader, const std::string &dest)
{
	const std::string ns = "/proc/" + std::to_string(leader) + "/ns/mnt";
	UniqueFd fd(::open(ns.c_str(), O_RDONLY | O_CLOEXEC));
	if (!fd)
		return fail(last_errno_error("Failed to open " + ns));
	const char *path = dest.c_str();
	const pid_t pid = ::fork();
	if (pid < 0)
		return fail(last_errno_error("Failed to fork"));
	if (pid == 0) {
		if (::setns(fd.get(), CLONE_NEWNS) < 0 || ::umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) < 0)
			::_exit(errno);
		struct stat st {};
		if (::lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
			(void)::unlink(path);
		else if (::lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			(void)::rmdir(path);
		::_exit(0);
	}
	int status = 0;
	while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	const int err = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
	if (err != 0)
		return fail(errno_error(err, "Failed to unmount " + dest + " in the machine"));
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

// The device nodes and classes `unit`'s device cgroup allows now, as systemd reports them.
Result<std::vector<std::string>> device_allow_of(sd_bus *bus, const std::string &unit)
{
	BusError err;
	sd_bus_message *raw = nullptr;
	int r = sd_bus_call_method(bus, SYSTEMD, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "GetUnit", err.get(), &raw, "s", unit.c_str());
	MessagePtr reply(raw);
	const char *path = nullptr;
	if (r < 0 || (r = sd_bus_message_read(reply.get(), "o", &path)) < 0)
		return fail(make_error("Failed to find " + unit + ": " + err.text(r), EXIT_NOT_READY, -r));
	sd_bus_message *praw = nullptr;
	BusError perr;
	r = sd_bus_get_property(bus, SYSTEMD, path, "org.freedesktop.systemd1.Service", "DeviceAllow", perr.get(), &praw, "a(ss)");
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

bool wrote(const std::vector<std::string> &written, const std::string &path) { return std::find(written.begin(), written.end(), path) != written.end(); }

// What of the change only a restart applies (see the header).
std::vector<std::string> not_live(const MachineFiles &f, const HostBinds &b, const std::string &old_text, const std::vector<std::string> &written,
				  const MachineInfo &m)
{
	std::vector<std::string> out;
	if (m.unit != f.unit)
		out.push_back(f.machine + " runs in " + m.unit + ", not " + f.unit + ": give that unit with --unit");
	if (user_namespaced(m.leader))
		out.push_back(f.machine + " runs in a user namespace: systemd-machined binds into none");
	const auto exec = [](const std::vector<SettingLine> &lines) {
		std::vector<SettingLine> e;
		std::copy_if(lines.begin(), lines.end(), std::back_inserter(e), [](const SettingLine &l) { return l.section == "Exec"; });
		return e;
	};
	const auto before = exec(owned_lines(old_text)), after = exec(b.nspawn);
	for (const auto &l : after)
		if (std::find(before.begin(), before.end(), l) == before.end())
			out.push_back("[Exec] " + l.text() + ": nspawn applies it when the machine starts");
	for (const auto &l : before)
		if (std::find(after.begin(), after.end(), l) == after.end())
			out.push_back("[Exec] " + l.text() + " removed: nspawn applies it when the machine starts");
	if (wrote(written, f.settings + "/unbounded-nvidia.enabled"))
		out.push_back("the kill switch (unbounded-nvidia.enabled): the machine's generator reads it at boot");
	if (wrote(written, f.dropin) && !unified_cgroups())
		out.push_back("DeviceAllow= on the legacy cgroup hierarchy: a running machine's device cgroup keeps its own list");
	return out;
}

}  // namespace

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

// The mounts of `plan`, additions first: one that fails takes back those made before it, so the
// machine keeps what it had. An unmount that fails (after every addition) is reported as it is.
Result<void> change_mounts(sd_bus *bus, const std::string &machine, std::uint32_t leader, const LivePlan &plan, std::vector<std::string> &done)
{
	std::vector<std::string> added;
	for (const auto &b : plan.add) {
		if (auto r = bind_into(bus, machine, b); !r) {
			for (const auto &dest : added)
				(void)unmount_in(leader, dest);
			return r;
		}
		added.push_back(b.dest);
		done.push_back("bound " + b.source + " at " + b.dest + (b.read_only ? " read-only" : ""));
	}
	for (const auto &b : plan.replace) {
		auto r = unmount_in(leader, b.dest);
		if (r)
			r = bind_into(bus, machine, b);
		if (!r)
			return r;
		done.push_back("rebound " + b.source + " at " + b.dest + (b.read_only ? " read-only" : ""));
	}
	for (const auto &dest : plan.remove) {
		if (auto r = unmount_in(leader, dest); !r)
			return r;
		done.push_back("unmounted " + dest);
	}
	return {};
}

// After the daemon-reload: the unit's device cgroup allows each node binds gives, or it is an error.
Result<void> check_device_allow(sd_bus *bus, const MachineFiles &f, const HostBinds &b)
{
	auto allowed = device_allow_of(bus, f.unit);
	if (!allowed)
		return fail(allowed.error());
	for (const auto &d : b.device_allow) {
		const auto node = d.substr(0, d.find(' '));
		if (std::find(allowed->begin(), allowed->end(), node) == allowed->end())
			return fail(make_error(f.unit + " does not allow " + node + " after the daemon-reload (DeviceAllow= overridden by another drop-in?)"));
	}
	return {};
}

}  // namespace

LiveResult apply_live(const MachineFiles &f, const HostBinds &b, const std::string &old_text, const std::vector<std::string> &written)
{
	LiveResult res;
	const auto failed = [&](const Error &e) {
		res.state = "failed";
		res.error = e.message;
		return res;
	};
	sd_bus *raw = nullptr;
	const int r = sd_bus_open_system(&raw);
	BusPtr bus(raw);
	if (r < 0)
		return failed(errno_error(-r, "Failed to connect to the system bus"));
	auto machine = find_machine(bus.get(), f.machine);
	if (!machine)
		return failed(machine.error());
	if (!*machine || (*machine)->state == "closing") {
		auto units = connect_system_manager();
		auto unit = units ? (*units)->state(f.unit) : fail(units.error());
		const bool runs = unit && (unit->active_state == "active" || unit->active_state == "activating" || unit->active_state == "reloading");
		res.state = runs ? "not-live" : "not-running";
		if (runs)
			res.not_live.push_back(f.unit + " runs, but systemd-machined knows no machine " + f.machine + " (started with --register=no?)");
		return res;
	}
	const auto &m = **machine;
	if (res.not_live = not_live(f, b, old_text, written, m); !res.not_live.empty()) {
		res.state = "not-live";
		return res;
	}
	std::vector<BindSpec> wanted;
	for (const auto &l : b.nspawn)
		if (auto spec = bind_spec(l))
			wanted.push_back(*spec);
	auto mounts = machine_mounts(m.leader, wanted);
	if (!mounts)
		return failed(mounts.error());
	const auto plan = plan_live(wanted, *mounts);
	if (written.empty() && plan.empty()) {
		res.state = "applied";
		return res;
	}
	if (wrote(written, f.dropin)) {
		auto reloaded = daemon_reload(bus.get());
		auto checked = reloaded ? check_device_allow(bus.get(), f, b) : reloaded;
		if (!checked)
			return failed(checked.error());
		res.done.push_back("reloaded systemd: " + f.unit + "'s DeviceAllow= as the drop-in says");
	}
	if (auto changed = change_mounts(bus.get(), f.machine, m.leader, plan, res.done); !changed)
		return failed(changed.error());
	auto units = connect_machine_manager(f.machine);
	auto started = units ? (*units)->start(REFRESH_UNIT, REFRESH_TIMEOUT) : fail(units.error());
	res.refresh = started ? "done" : started.error().message;
	res.state = started ? "applied" : "failed";
	if (!started)
		res.error = "The machine's " + std::string(REFRESH_UNIT) + " did not succeed: " + started.error().message;
	return res;
}

}  // namespace unbounded::host
