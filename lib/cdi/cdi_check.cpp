#include "cdi_check.hpp"

#include "bounded_parse.hpp"
#include "cdi_model.hpp"
#include "confined_open.hpp"
#include "fs.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <map>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace unbounded {
namespace {

using json = nlohmann::ordered_json;

struct Checker {
	const std::string &display;
	std::vector<Problem> &problems;
	CdiVersionNeed needs;

	// A spec's strings (names, paths) reach the message: printable() keeps it one printable line.
	void bad(const std::string &what) { problems.push_back(Problem{display, printable(display + ": " + what)}); }

	bool fields(const json &o, const std::string &where, std::initializer_list<const char *> allowed)
	{
		if (!o.is_object()) {
			bad(where + " is not a mapping");
			return false;
		}
		for (const auto &item : o.items()) {
			// Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
			const std::string &k = item.key();
			if (std::find_if(allowed.begin(), allowed.end(), [&](const char *a) { return k == a; }) == allowed.end())
				bad("unknown field '" + printable(k) + "' in " + where);
		}
		return true;
	}

	bool string_field(const json &o, const char *key, const std::string &where, bool required, bool absolute = false)
	{
		if (!o.contains(key)) {
			if (required)
				bad(where + " has no " + key);
			return false;
		}
		if (!o[key].is_string()) {
			bad(std::string(key) + " of " + where + " is not a string");
			return false;
		}
		if (absolute && (o[key].get<std::string>().empty() || o[key].get<std::string>().front() != '/')) {
			bad(std::string(key) + " of " + where + " is not an absolute path");
			return false;
		}
		return true;
	}

	void edits(const json &e, const std::string &where)
	{
		if (!fields(e, where, {"env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGids", "netDevices"}))
			return;
		if (e.contains("env")) {
			if (!e["env"].is_array())
				bad("env of " + where + " is not a list");
			else
				for (const auto &v : e["env"])
					if (!v.is_string() || v.get<std::string>().find('=') == std::string::npos)
						bad("env of " + where + " has an entry that is not NAME=value");
		}
		if (e.contains("deviceNodes")) {
			std::size_t i = 0;
			for (const auto &d : e["deviceNodes"]) {
				const std::string w = where + ".deviceNodes[" + std::to_string(i++) + "]";
				if (!fields(d, w, {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}))
					continue;
				string_field(d, "path", w, true, true);
				if (string_field(d, "hostPath", w, false, true))
					needs.add(CdiFeature::DeviceNodeHostPath);
				for (const char *k : {"major", "minor", "fileMode", "uid", "gid"})
					if (d.contains(k) && !d[k].is_number_integer())
						bad(std::string(k) + " of " + w + " is not an integer");
			}
		}
		if (e.contains("mounts")) {
			std::size_t i = 0;
			for (const auto &m : e["mounts"]) {
				const std::string w = where + ".mounts[" + std::to_string(i++) + "]";
				if (!fields(m, w, {"hostPath", "containerPath", "type", "options"}))
					continue;
				string_field(m, "hostPath", w, true);
				string_field(m, "containerPath", w, true, true);
				if (m.contains("type"))
					needs.add(CdiFeature::MountType);
			}
		}
		if (e.contains("hooks")) {
			static const std::set<std::string> names = {"prestart", "createRuntime", "createContainer",
								    "startContainer", "poststart", "poststop"};
			std::size_t i = 0;
			for (const auto &h : e["hooks"]) {
				const std::string w = where + ".hooks[" + std::to_string(i++) + "]";
				if (!fields(h, w, {"hookName", "path", "args", "env", "timeout"}))
					continue;
				if (string_field(h, "hookName", w, true) && !names.count(h["hookName"].get<std::string>()))
					bad("hookName of " + w + " is not a valid hook name");
				string_field(h, "path", w, true, true);
			}
		}
		if (e.contains("additionalGids"))
			needs.add(CdiFeature::AdditionalGids);
		if (e.contains("intelRdt"))
			needs.add(CdiFeature::IntelRdt);
		if (e.contains("netDevices"))
			needs.add(CdiFeature::NetDevices);
	}
};

// Why a file could not be read, for a problem that already names it: the errno text for a plain
// failure ("No such file or directory"), the whole sentence when we refused it (a FIFO, too large).
std::string read_failure(const Error &e)
{
	return e.message.starts_with("Refusing") ? e.message : errno_string(e.errnum);
}

}  // namespace

UniqueFd open_machine_root(const Context &ctx)
{
	return UniqueFd(::open(ctx.root.empty() ? "/" : ctx.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

void check_cdi_structure(const nlohmann::ordered_json &doc, const std::string &display, std::vector<Problem> &problems)
{
	Checker c{display, problems, {}};
	if (!c.fields(doc, "the spec", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}))
		return;
	std::string version;
	if (c.string_field(doc, "cdiVersion", "the spec", true)) {
		version = doc["cdiVersion"].get<std::string>();
		if (!known_cdi_version(version))
			c.bad("unknown cdiVersion '" + printable(version) + "'");
	}
	if (c.string_field(doc, "kind", "the spec", true)) {
		const std::string kind = doc["kind"].get<std::string>();
		auto slash = kind.find('/');
		if (slash == std::string::npos || !valid_cdi_name(std::string_view(kind).substr(0, slash), false) || !valid_cdi_name(std::string_view(kind).substr(slash + 1), false))
			c.bad("invalid kind '" + printable(kind) + "'");
		else if (kind.substr(slash + 1).find('.') != std::string::npos)
			c.needs.add(CdiFeature::DotInClass);
	}
	if (doc.contains("annotations"))
		c.needs.add(CdiFeature::Annotations);
	if (!doc.contains("devices") || !doc["devices"].is_array() || doc["devices"].empty()) {
		c.bad("no devices");
	} else {
		std::set<std::string> seen;
		std::size_t i = 0;
		for (const auto &d : doc["devices"]) {
			const std::string w = "devices[" + std::to_string(i++) + "]";
			if (!c.fields(d, w, {"name", "annotations", "containerEdits"}))
				continue;
			std::string name = w;
			if (c.string_field(d, "name", w, true)) {
				name = d["name"].get<std::string>();
				if (!valid_cdi_name(name, true))
					c.bad("invalid device name '" + printable(name) + "'");
				else if (std::isdigit(static_cast<unsigned char>(name.front())))
					c.needs.add(CdiFeature::DigitFirstName);
				if (!seen.insert(name).second)
					c.bad("device '" + name + "' is defined twice");
			}
			if (d.contains("annotations"))
				c.needs.add(CdiFeature::Annotations);
			if (!d.contains("containerEdits") || !d["containerEdits"].is_object() || d["containerEdits"].empty())
				c.bad("device '" + name + "' has empty containerEdits");
			else
				c.edits(d["containerEdits"], "device '" + name + "'");
		}
	}
	if (doc.contains("containerEdits"))
		c.edits(doc["containerEdits"], "containerEdits");
	if (known_cdi_version(version) && compare_cdi_versions(version, c.needs.version()) < 0)
		c.bad("cdiVersion " + version + " is lower than " + std::string(c.needs.why()) + " requires");
}

namespace {

// Checks paths a spec names, each once, resolved inside the machine root (a symlink never leads out).
class HostPathChecker {
public:
	HostPathChecker(const Context &ctx, const std::string &display, std::vector<Problem> &problems,
			const HostPathBudget &budget = {})
		: root_fd_(open_machine_root(ctx)), display_(display), problems_(problems), budget_(budget), steps_(budget.steps),
		  // No time budget: no deadline (now() + milliseconds::max() overflows the clock's nanoseconds).
		  deadline_(budget.time == std::chrono::milliseconds::max() ? std::chrono::steady_clock::time_point::max()
									    : std::chrono::steady_clock::now() + budget.time)
	{
	}

	// A device node the spec gives a major for must be that device: a MIG access node or an IMEX
	// channel with another minor opens another instance or channel.
	void check(const std::string &path, bool device, const json *spec_node = nullptr)
	{
		if (stopped_ || path.empty() || path.front() != '/' || !checked_.insert(path + (device ? "\1" : "")).second)
			return;
		if (budget_.limited() && (failures_ >= budget_.failures || std::chrono::steady_clock::now() > deadline_ || steps_ == 0)) {
			stop();
			return;
		}
		int err = 0;
		UniqueFd fd = open(path, !device, err);
		struct stat st = {};
		if (err == ETIMEDOUT) {
			stop();
			return;
		}
		if (!fd || ::fstat(fd.get(), &st) < 0) {
			failed(Problem{path, display_ + ": " + (device ? "device node " : "hostPath ") + path + " does not exist"});
			return;
		}
		if (device && !S_ISCHR(st.st_mode)) {
			failed(Problem{path, display_ + ": device node " + path + " is not a character device"});
			return;
		}
		if (!spec_node || !spec_node->contains("major"))
			return;
		auto number = [&](const char *key) -> long long {
			const bool has = spec_node->contains(key) && (*spec_node)[key].is_number_integer();
			return has ? (*spec_node)[key].get<long long>() : 0;  // omitted: 0, as in the CDI Go types
		};
		const long long want_major = number("major"), want_minor = number("minor");
		if (static_cast<long long>(::major(st.st_rdev)) != want_major || static_cast<long long>(::minor(st.st_rdev)) != want_minor)
			failed(Problem{path, display_ + ": device node " + path + " is " + std::to_string(::major(st.st_rdev)) + ":" +
						     std::to_string(::minor(st.st_rdev)) + ", the spec says " + std::to_string(want_major) +
						     ":" + std::to_string(want_minor)});
	}

private:
	// The directory a path is in is resolved once for all the paths in it (a spec's hostPaths share
	// a few directories); the last component is then opened in it without following. Where that is
	// a symlink to follow, or a dot, the whole path is resolved from the root as before.
	UniqueFd open(const std::string &path, bool follow_last, int &err)
	{
		const std::string dir = fs::dirname(path), base = fs::basename(path);
		if (base.empty() || base == "." || base == ".." || path.back() == '/')
			return open_whole(path, follow_last, err);
		auto it = dirs_.find(dir);
		if (it == dirs_.end()) {
			if (dirs_.size() >= 256)
				dirs_.clear();  // bounded: fds and memory
			int e = 0;
			UniqueFd d = open_whole(dir, true, e);
			if (e == ETIMEDOUT) {
				err = e;
				return UniqueFd();
			}
			it = dirs_.emplace(dir, std::move(d)).first;
		}
		if (!it->second) {
			err = ENOENT;
			return UniqueFd();
		}
		UniqueFd fd(::openat(it->second.get(), base.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
		struct stat st = {};
		if (!fd || ::fstat(fd.get(), &st) < 0) {
			err = errno;
			return UniqueFd();
		}
		if (S_ISLNK(st.st_mode) && follow_last)
			return open_whole(path, follow_last, err);
		return fd;
	}

	UniqueFd open_whole(const std::string &path, bool follow_last, int &err)
	{
		if (root_fd_.get() < 0) {
			err = EBADF;
			return UniqueFd();
		}
		auto fd = open_confined(root_fd_.get(), path,
					ConfinedOpen{Confinement::InRoot, O_PATH, follow_last, budget_.limited() ? &steps_ : nullptr});
		if (!fd) {
			err = fd.error().errnum;
			return UniqueFd();
		}
		return std::move(*fd);
	}

	void failed(Problem p)
	{
		failures_++;
		p.message = printable(p.message);  // the spec's path, as the spec wrote it
		problems_.push_back(std::move(p));
	}

	// The rest of the spec is not looked at: said once, as a problem (nothing is known about the
	// paths left), in words an operator can act on.
	void stop()
	{
		if (stopped_)
			return;
		stopped_ = true;
		if (failures_ >= budget_.failures) {
			problems_.back().message += " (the rest not checked)";
			return;
		}
		problems_.push_back(Problem{display_, display_ + ": stopped checking its hostPaths after " + std::to_string(checked_.size() - 1) +
							      " of them: resolving them takes more than the budget for a spec written by a pod "
							      "(symlink chains?)"});
	}

	const UniqueFd root_fd_;
	const std::string &display_;
	std::vector<Problem> &problems_;
	const HostPathBudget budget_;
	std::uint64_t steps_;
	const std::chrono::steady_clock::time_point deadline_;
	std::set<std::string> checked_;
	std::map<std::string, UniqueFd> dirs_;
	std::size_t failures_ = 0;
	bool stopped_ = false;
};

void check_missing_core_mounts(const std::set<std::string> &bases, const std::string &display, const std::string &version,
			       std::vector<Problem> &problems)
{
	for (const std::string lib : {"libcuda.so.", "libnvidia-ml.so."})
		if (!bases.count(lib + version))
			problems.push_back(Problem{display, display + " has no mount of " + lib + version});
}

}  // namespace

void check_cdi_host_paths(const Context &ctx, const nlohmann::ordered_json &doc, const std::string &display,
			  std::vector<Problem> &problems, const HostPathBudget &budget)
{
	HostPathChecker checker(ctx, display, problems, budget);
	for_each_edits(doc, [&](const json &e) {
		if (e.contains("mounts") && e["mounts"].is_array())
			for (const auto &m : e["mounts"])
				if (m.is_object() && m.contains("hostPath") && m["hostPath"].is_string())
					checker.check(m["hostPath"].get<std::string>(), false);
		if (e.contains("deviceNodes") && e["deviceNodes"].is_array())
			for (const auto &d : e["deviceNodes"]) {
				if (!d.is_object())
					continue;
				const char *key = d.contains("hostPath") ? "hostPath" : "path";
				if (d.contains(key) && d[key].is_string())
					checker.check(d[key].get<std::string>(), true, &d);
			}
		if (e.contains("hooks") && e["hooks"].is_array())
			for (const auto &h : e["hooks"])
				if (h.is_object() && h.contains("path") && h["path"].is_string())
					checker.check(h["path"].get<std::string>(), false);
	});
}

void check_core_mounts(const nlohmann::ordered_json &doc, const std::string &display, const std::string &version,
		       std::vector<Problem> &problems)
{
	std::set<std::string> bases;
	if (doc.contains("containerEdits") && doc["containerEdits"].is_object() && doc["containerEdits"].contains("mounts") &&
	    doc["containerEdits"]["mounts"].is_array())
		for (const auto &m : doc["containerEdits"]["mounts"])
			if (m.is_object() && m.contains("hostPath") && m["hostPath"].is_string())
				bases.insert(fs::basename(m["hostPath"].get<std::string>()));
	check_missing_core_mounts(bases, display, version, problems);
}

std::vector<Problem> verify_cdi_spec(const Context &ctx, const SpecRead &file, const std::string &driver_version,
				     const CdiSpec *expected, const std::string &kind)
{
	std::vector<Problem> problems;
	const std::string &path = file.path;
	// Our own spec may be larger than the cap on specs anyone else could write (6,000 IMEX channels
	// are 2.1 MB): read up to what we generate, and believed only when it is byte for byte that.
	const std::size_t cap = expected ? std::max(MAX_SPEC_BYTES, expected->yaml.size() + 1) : MAX_SPEC_BYTES;
	auto text = file.bounded(cap);
	if ((text && text->size() > MAX_SPEC_BYTES && !(expected && *text == expected->yaml)) ||
	    (!text && text.error().errnum == EFBIG && cap > MAX_SPEC_BYTES))
		text = fail(errno_error(EFBIG, "Refusing to parse " + path + ", it is larger than " + std::to_string(MAX_SPEC_BYTES) +
						       " bytes and not the spec generated for the current state"));
	if (!text) {
		problems.push_back(Problem{path, "CDI spec " + path + " is unreadable: " + read_failure(text.error())});
		return problems;
	}
	if (expected && *text == expected->yaml) {
		// The file is exactly the spec for the current state, which is valid by construction:
		// what is left to check is the world it points at: its mounts and its hook. Its device
		// nodes are what the enumeration that generated it has just read (lstat: a character
		// device, that major and minor); checking each again would double the cost on a MIG
		// machine (124 nodes) and learn nothing.
		HostPathChecker checker(ctx, path, problems);
		std::set<std::string> bases;
		for (const auto &p : expected->mount_host_paths) {
			checker.check(p, false);
			bases.insert(fs::basename(p));
		}
		if (expected->hook_path)
			checker.check(*expected->hook_path, false);
		if (!driver_version.empty())
			check_missing_core_mounts(bases, path, driver_version, problems);
		return problems;
	}
	auto doc = parse_yaml_bounded(*text, path);
	if (!doc) {
		problems.push_back(Problem{path, doc.error().message});
		return problems;
	}
	check_cdi_structure(*doc, path, problems);
	if (!problems.empty())
		return problems;
	if ((*doc)["kind"] != kind)
		problems.push_back(Problem{path, path + ": kind is " + printable((*doc)["kind"].get<std::string>()) + ", expected " + kind});
	check_cdi_host_paths(ctx, *doc, path, problems);
	if (!driver_version.empty())
		check_core_mounts(*doc, path, driver_version, problems);
	if (expected)
		problems.push_back(Problem{path, "CDI spec " + path + " is stale: it differs from the spec for the current driver root and devices"});
	return problems;
}

std::vector<Problem> verify_device_plugin_spec(const Context &ctx, const std::string &path, const std::string &driver_version,
					       std::optional<Problem> *wiring)
{
	return verify_device_plugin_spec(ctx, read_spec(ctx, path, MAX_SPEC_BYTES), driver_version, wiring);
}

std::optional<WrongRoot> generated_from_another_root(const json &doc, const std::string &driver_root)
{
	const std::string root = driver_root.ends_with('/') ? driver_root.substr(0, driver_root.size() - 1) : driver_root;
	auto str = [](const json &o, const char *key) {
		return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
	};
	std::optional<WrongRoot> node, outside;
	bool inside = false;  // a core library from the root: generated from it, whatever else it mounts
	for_each_edits(doc, [&](const json &e) {
		if (e.contains("mounts") && e["mounts"].is_array())
			for (const auto &m : e["mounts"]) {
				const std::string host = str(m, "hostPath"), base = fs::basename(host);
				if (host.size() > PATH_MAX || !(base.starts_with("libcuda.so.") || base.starts_with("libnvidia-ml.so.")))
					continue;
				if (host.starts_with(root + "/")) {
					inside = true;
					continue;
				}
				if (outside)
					continue;
				// nvcdi's containerPath is the hostPath less the root it was given.
				const std::string ctr = str(m, "containerPath");
				const bool known = ctr.starts_with("/") && host.ends_with(ctr);
				const std::string from = known ? host.substr(0, host.size() - ctr.size()) : std::string();
				outside = WrongRoot{false, host, known ? (from.empty() ? "/" : from) : ""};
			}
		if (!node && e.contains("deviceNodes") && e["deviceNodes"].is_array())
			for (const auto &d : e["deviceNodes"])
				if (const std::string host = str(d, "hostPath"); host.size() <= PATH_MAX && host.starts_with(root + "/dev/")) {
					node = WrongRoot{true, host, root};
					break;
				}
	});
	if (node)
		return node;
	return inside ? std::nullopt : outside;
}

std::vector<Problem> verify_device_plugin_spec(const Context &ctx, const SpecRead &file, const std::string &driver_version,
					       std::optional<Problem> *wiring)
{
	std::vector<Problem> problems;
	const std::string &path = file.path;
	// Written by a pod: hostile until proven otherwise (a FIFO, a huge or deeply nested file).
	auto text = file.bounded(MAX_SPEC_BYTES);
	if (!text) {
		if (text.error().errnum != ENOENT)
			problems.push_back(Problem{path, "Device plugin CDI spec " + path + " is unreadable: " + read_failure(text.error())});
		return problems;  // absent: the device plugin has not written it (yet), nothing to check
	}
	if (auto r = check_json_bounded(*text, path); !r) {
		problems.push_back(Problem{path, "Device plugin CDI spec " + r.error().message});
		return problems;
	}
	json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
	if (doc.is_discarded()) {
		problems.push_back(Problem{path, "Device plugin CDI spec " + path + " is not valid JSON"});
		return problems;
	}
	check_cdi_structure(doc, path, problems);
	if (!problems.empty())
		return problems;
	// k8s-device-plugin generates its spec inside its pod from /driver-root, the hostPath mount of its
	// driver root, and rewrites the paths to that root (internal/cdi/cdi.go); its device root is its
	// --dev-root, which defaults to the driver root (api/config/v1/config.go).
	if (wiring)
		if (auto w = generated_from_another_root(doc, ctx.config.driver_root)) {
			const std::string &root = ctx.config.driver_root;
			*wiring = Problem{
				path, w->device_node
					      ? printable("The NVIDIA device plugin's CDI spec " + path + " takes device nodes from " + w->host_path +
							  ": its device root followed its driver root, and " + root +
							  " has no dev/. Set the device plugin's device root to / (Helm value nvidiaDevRoot, its "
							  "NVIDIA_DEV_ROOT or --dev-root) and restart its pod")
					      : printable("The NVIDIA device plugin's CDI spec " + path + " mounts " + w->host_path + ", outside " + root +
							  (w->root.empty() ? std::string(": it was generated from another driver root,")
									   : ": it was generated from the driver root " + w->root + ",") +
							  " not from the one setup keeps current. Set the device plugin's driver root to " + root +
							  " (Helm value nvidiaDriverRoot, its NVIDIA_DRIVER_ROOT or --driver-root; with the GPU Operator, "
							  "hostPaths.driverInstallDir) and restart its pod")};
			return problems;
		}
	check_core_mounts(doc, path, driver_version, problems);
	check_cdi_host_paths(ctx, doc, path, problems, FOREIGN_SPEC_BUDGET);
	return problems;
}

}  // namespace unbounded
