// UnitManager over sd-bus: org.freedesktop.systemd1.Manager LoadUnit/StartUnit/StopUnit, waiting for
// the job's JobRemoved signal, and the unit's properties for status. libsystemd is dlopen()ed on the
// first connect, as systemd does with its optional libraries: on bookworm it pulls in libgcrypt,
// liblz4, libzstd, liblzma and libcap (about 1 ms per start), which setup's boot path, which never
// talks to the bus, must not pay (core/sd_protocols.hpp).
#include "unit_manager.hpp"

#include <chrono>
#include <cstdlib>
#include <cctype>
#include <dlfcn.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

namespace unbounded {
namespace {

// The sd-bus functions we call, resolved from libsystemd.so.0 (declarations from its header, so a
// signature that changed fails the build, not the call).
struct SdBusApi {
#define SD_BUS_FUNCTIONS(X)           \
	X(sd_bus_call_method)         \
	X(sd_bus_error_free)          \
	X(sd_bus_error_has_name)      \
	X(sd_bus_flush_close_unref)   \
	X(sd_bus_get_property)        \
	X(sd_bus_get_property_string) \
	X(sd_bus_match_signal)        \
	X(sd_bus_message_read)        \
	X(sd_bus_message_read_array)  \
	X(sd_bus_message_read_basic)  \
	X(sd_bus_message_unref)       \
	X(sd_bus_new)                 \
	X(sd_bus_open_system)         \
	X(sd_bus_open_system_machine) \
	X(sd_bus_process)             \
	X(sd_bus_set_address)         \
	X(sd_bus_slot_unref)          \
	X(sd_bus_start)               \
	X(sd_bus_unref)               \
	X(sd_bus_wait)
#define SD_BUS_MEMBER(name) decltype(&::name) name = nullptr;
	SD_BUS_FUNCTIONS(SD_BUS_MEMBER)
#undef SD_BUS_MEMBER
};

const SdBusApi *bus_api;  // set by sd_bus_api() before any manager exists

// Loaded once per process, into bus_api; the library stays loaded (sd-bus objects outlive any one
// caller).
Result<void> sd_bus_api()
{
	static SdBusApi api;
	static std::string failure;
	static bool loaded = false;
	if (!loaded) {
		loaded = true;
		void *lib = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		if (!lib)
			failure = std::string("Failed to load libsystemd.so.0: ") + ::dlerror();
#define SD_BUS_RESOLVE(name)                                                          \
	if (lib && failure.empty()) {                                                 \
		api.name = reinterpret_cast<decltype(api.name)>(::dlsym(lib, #name)); \
		if (!api.name)                                                        \
			failure = "Failed to find " #name " in libsystemd.so.0";      \
	}
		SD_BUS_FUNCTIONS(SD_BUS_RESOLVE)
#undef SD_BUS_RESOLVE
	}
	if (!failure.empty())
		return fail(make_error(failure, EXIT_NOT_READY, ENOENT));
	bus_api = &api;
	return {};
}
#undef SD_BUS_FUNCTIONS

constexpr const char *DEST = "org.freedesktop.systemd1";
constexpr const char *PATH = "/org/freedesktop/systemd1";
constexpr const char *MANAGER = "org.freedesktop.systemd1.Manager";
constexpr const char *UNIT = "org.freedesktop.systemd1.Unit";

struct BusDeleter {
	void operator()(sd_bus *b) const { bus_api->sd_bus_flush_close_unref(b); }
};
struct MessageDeleter {
	void operator()(sd_bus_message *m) const { bus_api->sd_bus_message_unref(m); }
};
struct SlotDeleter {
	void operator()(sd_bus_slot *s) const { bus_api->sd_bus_slot_unref(s); }
};
using Message = std::unique_ptr<sd_bus_message, MessageDeleter>;

// sd_bus_error owns strings; this frees them on every path.
class BusError {
public:
	~BusError() { bus_api->sd_bus_error_free(&e_); }
	sd_bus_error *get() { return &e_; }
	std::string text(int r) const
	{
		return e_.message ? std::string(e_.message) : errno_string(-r);
	}

private:
	sd_bus_error e_ = {};  // SD_BUS_ERROR_NULL, whose compound literal is not C++
};

struct JobWait {
	std::string path;
	std::string result;
	bool done = false;
};

int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *)
{
	auto *w = static_cast<JobWait *>(userdata);
	uint32_t id;
	const char *path = nullptr, *unit = nullptr, *result = nullptr;
	if (bus_api->sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
		return 0;
	if (path && w->path == path) {
		w->done = true;
		w->result = result ? result : "";
	}
	return 0;
}

class SdBusUnitManager final : public UnitManager {
public:
	SdBusUnitManager(sd_bus *bus, bool direct) : bus_(bus), direct_(direct) {}

	Result<UnitState> state(const std::string &unit) override
	{
		auto path = unit_path(unit);
		if (!path)
			return fail(path.error());
		UnitState s;
		const std::pair<const char *, std::string *> strings[] = {
			{"LoadState", &s.load_state}, {"ActiveState", &s.active_state}, {"SubState", &s.sub_state}};
		for (const auto &[prop, out] : strings)
			if (auto r = string_property(*path, UNIT, prop, unit, *out); !r)
				return fail(r.error());
		if (auto r = basic_property(*path, UNIT, "ActiveEnterTimestamp", 't', &s.active_enter_usec, unit); !r)
			return fail(r.error());
		// The queued job, (id, path); id 0 when there is none. Its type is the job object's.
		BusError err;
		sd_bus_message *reply = nullptr;
		int r = bus_api->sd_bus_get_property(bus_.get(), DEST, path->c_str(), UNIT, "Job", err.get(), &reply, "(uo)");
		Message m(reply);
		uint32_t id = 0;
		const char *job = nullptr;
		if (r >= 0)
			r = bus_api->sd_bus_message_read(m.get(), "(uo)", &id, &job);
		if (r < 0)
			return fail(errno_error(-r, "Failed to read the job of " + unit + ": " + err.text(r)));
		// A job that finished meanwhile has no object any more: then none is queued ("").
		if (id != 0 && job)
			(void)string_property(job, "org.freedesktop.systemd1.Job", "JobType", unit, s.job_type);
		return s;
	}

	Result<UnitStatus> status(const std::string &unit) override
	{
		auto path = unit_path(unit);
		if (!path)
			return fail(path.error());
		UnitStatus s;
		if (auto r = string_property(*path, UNIT, "ActiveState", unit, s.active_state); !r)
			return fail(r.error());
		if (auto r = string_property(*path, UNIT, "SubState", unit, s.sub_state); !r)
			return fail(r.error());
		constexpr const char *SERVICE = "org.freedesktop.systemd1.Service";
		int sigkill = 1;
		int32_t kill_signal = 15;
		if (auto r = basic_property(*path, SERVICE, "MainPID", 'u', &s.main_pid, unit); !r)
			return fail(r.error());
		if (auto r = basic_property(*path, SERVICE, "SendSIGKILL", 'b', &sigkill, unit); !r)
			return fail(r.error());
		if (auto r = basic_property(*path, SERVICE, "KillSignal", 'i', &kill_signal, unit); !r)
			return fail(r.error());
		s.send_sigkill = sigkill != 0;
		s.kill_signal = kill_signal;
		// Which run it is and since when: the license state is read from this run's journal only.
		s.invocation_id = invocation_id(*path);
		(void)basic_property(*path, UNIT, "ActiveEnterTimestamp", 't', &s.active_enter_usec, unit);  // 0 when unknown
		return s;
	}

	// The unit's InvocationID as 32 hex digits, "" when it has none (or the manager does not say).
	std::string invocation_id(const std::string &path)
	{
		BusError err;
		sd_bus_message *reply = nullptr;
		int r = bus_api->sd_bus_get_property(bus_.get(), DEST, path.c_str(), UNIT, "InvocationID", err.get(),
						     &reply, "ay");
		Message m(reply);
		const void *bytes = nullptr;
		size_t n = 0;
		std::string id;
		if (r >= 0 && bus_api->sd_bus_message_read_array(m.get(), 'y', &bytes, &n) >= 0 && n == 16) {
			static constexpr char hex[] = "0123456789abcdef";
			for (size_t i = 0; i < n; i++) {
				const auto b = static_cast<const unsigned char *>(bytes)[i];
				id += hex[b >> 4];
				id += hex[b & 15];
			}
		}
		return id;
	}

	Result<bool> system_stopping() override
	{
		BusError err;
		char *v = nullptr;
		int r = bus_api->sd_bus_get_property_string(bus_.get(), DEST, PATH, MANAGER, "SystemState", err.get(), &v);
		if (r < 0)
			return fail(errno_error(-r, "Failed to read the service manager's SystemState: " + err.text(r)));
		const bool stopping = std::string_view(v) == "stopping";
		free(v);
		return stopping;
	}

	Result<void> stop(const std::string &unit, Millis timeout) override { return job("stop", unit, timeout); }
	Result<void> start(const std::string &unit, Millis timeout) override { return job("start", unit, timeout); }

private:
	// A string property of the object at `path`, into `out`; errors name `unit`.
	Result<void> string_property(const std::string &path, const char *iface, const char *prop, const std::string &unit,
				     std::string &out)
	{
		BusError err;
		char *v = nullptr;
		int r = bus_api->sd_bus_get_property_string(bus_.get(), DEST, path.c_str(), iface, prop, err.get(), &v);
		if (r < 0)
			return fail(errno_error(-r, "Failed to read " + std::string(prop) + " of " + unit + ": " + err.text(r)));
		out = v;
		free(v);
		return {};
	}

	// A property of a basic D-Bus type (`type`, e.g. 't', 'u', 'b', 'i') into `out`.
	Result<void> basic_property(const std::string &path, const char *iface, const char *prop, char type, void *out,
				    const std::string &unit)
	{
		BusError err;
		sd_bus_message *reply = nullptr;
		const char signature[2] = {type, '\0'};
		int r = bus_api->sd_bus_get_property(bus_.get(), DEST, path.c_str(), iface, prop, err.get(), &reply, signature);
		Message m(reply);
		if (r >= 0)
			r = bus_api->sd_bus_message_read_basic(m.get(), type, out);
		if (r < 0)
			return fail(errno_error(-r, "Failed to read " + std::string(prop) + " of " + unit + ": " + err.text(r)));
		return {};
	}

	Result<std::string> unit_path(const std::string &unit)
	{
		BusError err;
		sd_bus_message *reply = nullptr;
		int r = bus_api->sd_bus_call_method(bus_.get(), DEST, PATH, MANAGER, "LoadUnit", err.get(), &reply, "s", unit.c_str());
		Message m(reply);
		const char *p = nullptr;
		if (r >= 0)
			r = bus_api->sd_bus_message_read(m.get(), "o", &p);
		if (r < 0)
			return fail(errno_error(-r, "Failed to load " + unit + ": " + err.text(r)));
		return std::string(p);
	}

	// `verb` "stop" or "start": the Manager's StopUnit or StartUnit.
	Result<void> job(const std::string &verb, const std::string &unit, Millis timeout)
	{
		const std::string capital = static_cast<char>(std::toupper(verb[0])) + verb.substr(1);
		JobWait wait;
		sd_bus_slot *slot = nullptr;
		// Subscribe before queueing the job so its JobRemoved cannot be missed.
		// On a direct connection to PID 1 messages carry no sender, so the match must not ask for one.
		int r = bus_api->sd_bus_match_signal(bus_.get(), &slot, direct_ ? nullptr : DEST, PATH, MANAGER, "JobRemoved",
						     on_job_removed, &wait);
		std::unique_ptr<sd_bus_slot, SlotDeleter> guard(slot);
		if (r < 0)
			return fail(errno_error(-r, "Failed to subscribe to systemd job signals"));
		{
			BusError err;
			sd_bus_message *reply = nullptr;
			r = bus_api->sd_bus_call_method(bus_.get(), DEST, PATH, MANAGER, "Subscribe", err.get(), &reply, "");
			Message m(reply);
			if (r < 0 && !bus_api->sd_bus_error_has_name(err.get(), "org.freedesktop.systemd1.AlreadySubscribed"))
				return fail(errno_error(-r, "Failed to subscribe to systemd: " + err.text(r)));
		}
		BusError err;
		sd_bus_message *reply = nullptr;
		r = bus_api->sd_bus_call_method(bus_.get(), DEST, PATH, MANAGER, (capital + "Unit").c_str(), err.get(), &reply, "ss", unit.c_str(),
						"replace");
		Message m(reply);
		const char *job_path = nullptr;
		if (r >= 0)
			r = bus_api->sd_bus_message_read(m.get(), "o", &job_path);
		if (r < 0)
			return fail(errno_error(-r, "Failed to " + verb + " " + unit + ": " + err.text(r)));
		wait.path = job_path;
		if (timeout.count() == 0)
			return {};  // queued: the caller does not wait for it

		const auto deadline = std::chrono::steady_clock::now() + timeout;
		while (!wait.done) {
			r = bus_api->sd_bus_process(bus_.get(), nullptr);
			if (r < 0)
				return fail(errno_error(-r, "Failed to process D-Bus messages"));
			if (r > 0)
				continue;
			auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
			if (left.count() <= 0)
				return fail(make_error("Timed out after " + format_duration(timeout) + " waiting for the " + verb + " job of " + unit,
						       EXIT_NOT_READY, ETIMEDOUT));
			r = bus_api->sd_bus_wait(bus_.get(), static_cast<uint64_t>(left.count()));
			if (r < 0 && r != -EINTR)
				return fail(errno_error(-r, "Failed to wait for D-Bus messages"));
		}
		if (wait.result != "done")
			return fail(make_error(capital + " job of " + unit + " finished with result '" + wait.result + "'"));
		return {};
	}

	std::unique_ptr<sd_bus, BusDeleter> bus_;
	bool direct_;
};

// A direct connection to a service manager at `address` (sd_bus_start() connects before it returns);
// nullptr and a negative errno when it fails.
int open_address(sd_bus **bus, const char *address)
{
	int r = bus_api->sd_bus_new(bus);
	if (r >= 0)
		r = bus_api->sd_bus_set_address(*bus, address);
	if (r >= 0)
		r = bus_api->sd_bus_start(*bus);
	if (r < 0 && *bus) {
		bus_api->sd_bus_unref(*bus);
		*bus = nullptr;
	}
	return r;
}

}  // namespace

Result<std::unique_ptr<UnitManager>> connect_system_manager()
{
	if (auto api = sd_bus_api(); !api)
		return fail(api.error());
	// As systemctl does: as root, talk to PID 1 over its private socket, which needs no D-Bus daemon
	// (minimal machine images have none); otherwise the system bus.
	sd_bus *bus = nullptr;
	if (::geteuid() == 0 && ::access("/run/systemd/private", F_OK) == 0 && !std::getenv("DBUS_SYSTEM_BUS_ADDRESS") &&
	    open_address(&bus, "unix:path=/run/systemd/private") >= 0)
		return std::unique_ptr<UnitManager>(std::make_unique<SdBusUnitManager>(bus, true));
	int r = bus_api->sd_bus_open_system(&bus);
	if (r < 0)
		return fail(errno_error(-r, "Failed to connect to the system bus"));
	return std::unique_ptr<UnitManager>(std::make_unique<SdBusUnitManager>(bus, false));
}

Result<std::unique_ptr<UnitManager>> connect_manager_socket(int socket_fd)
{
	if (auto api = sd_bus_api(); !api)
		return fail(api.error());
	// connect() through the fd's /proc link reaches the very socket that was found, wherever its path
	// leads meanwhile.
	const std::string address = "unix:path=/proc/self/fd/" + std::to_string(socket_fd);
	sd_bus *bus = nullptr;
	if (int r = open_address(&bus, address.c_str()); r < 0)
		return fail(errno_error(-r, "Failed to connect to the service manager"));
	return std::unique_ptr<UnitManager>(std::make_unique<SdBusUnitManager>(bus, true));
}

Result<std::unique_ptr<UnitManager>> connect_machine_manager(const std::string &machine)
{
	if (auto api = sd_bus_api(); !api)
		return fail(api.error());
	sd_bus *bus = nullptr;
	int r = bus_api->sd_bus_open_system_machine(&bus, machine.c_str());
	if (r < 0)
		return fail(errno_error(-r, "Failed to connect to the system bus of machine " + machine));
	return std::unique_ptr<UnitManager>(std::make_unique<SdBusUnitManager>(bus, false));
}

}  // namespace unbounded
