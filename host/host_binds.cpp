#include "host_binds.hpp"

#include "chase.hpp"
#include "devices.hpp"
#include "discovery_cache.hpp"
#include "driver_discovery.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "kernel_module.hpp"
#include "staging.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sys/stat.h>

namespace unbounded::host {

namespace {

constexpr const char *STAGING_MOUNT = "/run/host-nvidia/";
constexpr const char *LICENSING_MOUNT = "/run/host-nvidia-licensing";

// Only paths every reader takes as they are: a .nspawn value splits at ':' and a unit file expands '%'
// and backslashes, so anything else is refused rather than escaped three ways.
bool plain_path(std::string_view p)
{
	if (p.empty() || p[0] != '/' || p.find("/../") != std::string_view::npos || p.ends_with("/.."))
		return false;
	return std::all_of(p.begin(), p.end(), [](char c) {
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '.' ||
		       c == '_' || c == '-' || c == '+';
	});
}

// `path` (a plain_path()) without empty or "." components: systemd-machined's BindMountMachine (binds
// --apply) refuses a source that is not normalized (path_is_normalized()), where nspawn takes it.
std::string normalized(std::string_view path)
{
	std::string out;
	for (const auto &c : fs::split_path(path))
		if (!c.empty() && c != ".")
			out += "/" + std::string(c);
	return out.empty() ? "/" : out;
}

// The directory `path` names on the host, symlinks followed inside --root ("/lib" is "usr/lib" on a
// merged-/usr host): its canonical path, or nullopt when it is not a directory there.
std::optional<std::string> canonical_dir(int root_fd, const std::string &path)
{
	auto c = chase(root_fd, path, ChaseHow{Chase::InRoot, nullptr, {}});
	if (!c || !S_ISDIR(c->st.st_mode))
		return std::nullopt;
	return "/" + c->rel;
}

struct Discovered {
	std::string version;
	std::map<std::string, std::string> files;  // dest in the root -> host path of its source
	std::set<std::string> warnings;            // compared between trials: without the list of trees they name
	std::vector<std::string> messages;         // as discovery said them
	std::set<std::size_t> used;                // indices of the directories a file or a followed link lives in
	std::vector<std::string> notes;
};

// The machine's discovery over `dirs` as if each were bound at /run/host-nvidia/<i>: each tree's
// host_prefix is its host path, as the machine reads it from mountinfo, so absolute links map exactly.
Result<Discovered> discover_over(const Context &ctx, const std::vector<std::string> &dirs, const std::string &kernel, bool nvoptix,
				 DiscoveryCache &cache)
{
	std::vector<std::pair<std::string, std::string>> real_and_display;
	for (const auto &d : dirs)
		real_and_display.emplace_back(ctx.real(d), d);
	auto staging = Staging::from_dirs(real_and_display);
	if (!staging)
		return fail(staging.error());
	for (std::size_t i = 0; i < dirs.size(); i++)
		staging->trees()[i].host_prefix = dirs[i];
	DiscoveryInput in{&*staging, kernel, &cache, nvoptix};
	auto d = discover_driver(in);
	if (!d)
		return fail(d.error());
	Discovered out;
	out.version = d->version;
	// A warning that lists the trees looked in (no GSP firmware "in the staging mounts (A, B)") must
	// not look new in a trial without a directory that gives nothing: compared without the list.
	std::string listed;
	for (const auto &dir : dirs)
		listed += (listed.empty() ? "(" : ", ") + dir;
	listed += ")";
	out.messages = d->warnings;
	for (std::string w : d->warnings) {
		if (const auto at = w.find(listed); at != std::string::npos)
			w.replace(at, listed.size(), "(the staging mounts)");
		out.warnings.insert(std::move(w));
	}
	out.notes = d->notes;
	const auto tree_of = [&](const std::string &host_path) -> std::optional<std::size_t> {
		std::optional<std::size_t> best;
		for (std::size_t i = 0; i < dirs.size(); i++)
			if (host_path == dirs[i] || (host_path.starts_with(dirs[i]) && host_path[dirs[i].size()] == '/'))
				if (!best || dirs[i].size() > dirs[*best].size())
					best = i;
		return best;
	};
	for (const auto &f : d->files) {
		out.files[f.dest] = fs::join(dirs[f.source.tree], f.source.rel);
		out.used.insert(f.source.tree);
		for (const auto &v : f.source.via)
			if (auto t = tree_of(v))
				out.used.insert(*t);
	}
	return out;
}

// The smallest set of directories (in candidate order) whose discovery gives the same files from the
// same host paths and no warning that all of them did not give: each directory is dropped in turn,
// those no file came from first, and stays out when nothing changed. Greedy, so a directory another
// one could stand in for is dropped once and the other kept; every host family's layout has a test.
Result<std::vector<std::string>> smallest_set(const Context &ctx, const std::vector<std::string> &all, const Discovered &full,
					      const std::string &kernel, bool nvoptix, DiscoveryCache &cache)
{
	std::vector<std::size_t> order;
	for (std::size_t i = 0; i < all.size(); i++)
		if (!full.used.count(i))
			order.push_back(i);
	for (std::size_t i = 0; i < all.size(); i++)
		if (full.used.count(i))
			order.push_back(i);
	std::set<std::size_t> kept;
	for (std::size_t i = 0; i < all.size(); i++)
		kept.insert(i);
	for (std::size_t drop : order) {
		std::vector<std::string> trial;
		for (std::size_t i : kept)
			if (i != drop)
				trial.push_back(all[i]);
		if (trial.empty())
			continue;
		auto d = discover_over(ctx, trial, kernel, nvoptix, cache);
		if (!d || d->version != full.version || d->files != full.files)
			continue;
		if (!std::includes(full.warnings.begin(), full.warnings.end(), d->warnings.begin(), d->warnings.end()))
			continue;
		kept.erase(drop);
	}
	std::vector<std::string> out;
	for (std::size_t i : kept)
		out.push_back(all[i]);
	return out;
}

std::string normal_pci(std::string s)
{
	std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
	if (std::count(s.begin(), s.end(), ':') == 1)
		s = "0000:" + s;  // "18:00.0", as nvidia-smi shows it without the domain
	return s;
}

std::string gpu_line(std::size_t index, const Gpu &g)
{
	return std::to_string(index) + " " + g.pci + " " + g.uuid.value_or("(UUID unknown)");
}

// The GPUs --gpus names, by index (the host's PCI order, as NVML numbers them), UUID or PCI address.
Result<std::vector<const Gpu *>> select_gpus(const DeviceInventory &inv, const std::vector<std::string> &selectors)
{
	std::vector<const Gpu *> out;
	if (selectors.empty()) {
		for (const auto &g : inv.gpus)
			out.push_back(&g);
		return out;
	}
	std::set<const Gpu *> chosen;
	for (const auto &s : selectors) {
		const Gpu *match = nullptr;
		for (std::size_t i = 0; i < inv.gpus.size() && !match; i++) {
			const Gpu &g = inv.gpus[i];
			if ((all_digits(s) && s.size() < 5 && std::stoul(s) == i) || (g.uuid && *g.uuid == s) ||
			    (!g.pci.empty() && normal_pci(s) == g.pci))
				match = &g;
		}
		if (!match) {
			std::string have;
			for (std::size_t i = 0; i < inv.gpus.size(); i++)
				have += (i ? "; " : "") + gpu_line(i, inv.gpus[i]);
			return fail(usage_error("No GPU of this host is '" + s + "' (--gpus takes indices, UUIDs or PCI addresses: " + have + ")"));
		}
		chosen.insert(match);
	}
	for (const auto &g : inv.gpus)  // PCI order, whatever order --gpus named them in
		if (chosen.count(&g))
			out.push_back(&g);
	return out;
}

bool is_dir(const Context &ctx, const std::string &path)
{
	struct stat st = {};
	return ::lstat(ctx.real(path).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void add_node(HostBinds &b, const std::string &path, const char *access = "rwm")
{
	b.nspawn.push_back({"Files", "Bind", path});
	b.device_allow.push_back(path + " " + access);
}

void add_devices(const Context &ctx, const DeviceInventory &inv, const std::vector<const Gpu *> &gpus, HostBinds &b)
{
	for (const auto &n : inv.control)
		add_node(b, n.path);
	for (const Gpu *g : gpus)
		for (const auto &n : g->nodes)
			add_node(b, n.path);
	// Whole directories, so that the instances and channels made after the machine started are seen;
	// the device cgroup allows the driver's major, not each node.
	for (const char *dir : {"/dev/nvidia-caps", "/dev/nvidia-caps-imex-channels"})
		if (is_dir(ctx, dir)) {
			b.nspawn.push_back({"Files", "Bind", dir});
			b.device_allow.push_back(std::string("char-") + (dir + 5) + " rw");
		}
	for (const auto &f : inv.fabric)
		for (const auto &n : f.nodes)
			add_node(b, n.path, "rw");
	// The daemons' directories, not their sockets: a restarted daemon's new socket is then seen.
	std::set<std::string> ipc_dirs;
	for (const auto &p : inv.ipc)
		ipc_dirs.insert(p.starts_with("/run/") ? fs::dirname(p) : p);
	for (const auto &d : ipc_dirs)
		b.nspawn.push_back({"Files", "Bind", d});
}

void add_exec_lines(const Context &ctx, HostBinds &b)
{
	// runc's device programs on the unified cgroup hierarchy need bpf(), which nspawn's filter denies.
	struct stat st = {};
	if (::lstat(ctx.real("/sys/fs/cgroup/cgroup.controllers").c_str(), &st) == 0)
		b.nspawn.push_back({"Exec", "SystemCallFilter", "bpf"});
}

// The machine's settings reach it as files of a directory bound read-only: every systemd-nspawn reads
// BindReadOnly= from a .nspawn file, none reads a credential there (nspawn-gperf.gperf has no such key).
void add_settings(const BindsOptions &opt, const std::vector<const Gpu *> &gpus, HostBinds &b)
{
	if (opt.credentials) {
		b.settings.emplace_back("unbounded-nvidia.expected_gpus", std::to_string(gpus.size()));
		std::string list;
		for (const Gpu *g : gpus)
			list += (list.empty() ? "" : ",") + (g->uuid ? *g->uuid : g->pci);
		b.settings.emplace_back("unbounded-nvidia.gpus", list);
	}
	if (opt.enabled)
		b.settings.emplace_back("unbounded-nvidia.enabled", *opt.enabled);
	if (!b.settings.empty())
		b.nspawn.push_back({"Files", "BindReadOnly", settings_dir(opt.machine) + ":" + SETTINGS_MOUNT});
}

bool has_libcuda(const Context &ctx, const std::string &dir)
{
	auto d = fs::open_dir(ctx.real(dir));
	auto names = d ? fs::list_dir(d->get(), dir) : fail(d.error());
	return names && std::any_of(names->begin(), names->end(), [](const std::string &n) { return n.starts_with("libcuda.so."); });
}

// The host directories the driver may live in, per host family (Debian and its flavours and
// alternatives, Ubuntu, Red Hat, the .run installer, 32-bit, firmware, OptiX, graphics configs).
std::vector<std::string> candidate_directories(const Context &ctx)
{
	std::vector<std::string> dirs;
	for (const char *t : DEBIAN_TRIPLETS)  // 64-bit first: the order of the machine's staging trees
		if (std::string_view(t) != "i386-linux-gnu")
			dirs.push_back(std::string("/usr/lib/") + t);
	dirs.push_back("/usr/lib/i386-linux-gnu");
	dirs.insert(dirs.end(), {"/usr/lib64", "/usr/lib32"});
	// Where the driver's 64-bit libraries are in /usr/lib64 (Red Hat family, the .run installer on such
	// hosts), its 32-bit ones are in /usr/lib. Not elsewhere: on Debian /usr/lib holds every flavour
	// under nvidia/, and the flavour's own directory is the bind.
	if (has_libcuda(ctx, "/usr/lib64"))
		dirs.push_back("/usr/lib");
	// Debian keeps the real helper binaries in /usr/lib/nvidia/<flavour>/ (current, tesla-535, ...).
	if (auto d = fs::open_dir(ctx.real("/usr/lib/nvidia")))
		if (auto names = fs::list_dir(d->get(), "/usr/lib/nvidia"))
			for (const auto &n : *names)
				if (is_plain_file_name(n))
					dirs.push_back("/usr/lib/nvidia/" + n);
	dirs.insert(dirs.end(), {"/usr/bin", "/lib/firmware/nvidia", "/usr/share/nvidia", "/usr/share/glvnd/egl_vendor.d",
				 "/usr/share/egl/egl_external_platform.d", "/usr/share/vulkan", "/etc/OpenCL/vendors", "/etc/alternatives"});
	return dirs;
}

}  // namespace

bool valid_machine_name(std::string_view name)
{
	if (name.empty() || name.size() > 64)
		return false;
	std::size_t start = 0;
	for (;;) {  // each label: 1..63 of letters, digits and '-', neither starting nor ending with '-'
		const std::size_t dot = std::min(name.find('.', start), name.size());
		const auto label = name.substr(start, dot - start);
		if (label.empty() || label.front() == '-' || label.back() == '-' || !std::all_of(label.begin(), label.end(), [](char c) {
			    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
		    }))
			return false;
		if (dot == name.size())
			return true;
		start = dot + 1;
	}
}

std::string settings_dir(const std::string &machine) { return "/etc/unbounded-nvidia-host/machines/" + machine; }

Result<HostBinds> plan_binds(const Context &ctx, const BindsOptions &opt, const DeviceInventory *devices)
{
	if (opt.licensing && !plain_path(*opt.licensing))
		return fail(usage_error("--licensing " + *opt.licensing + ": an absolute path of letters, digits and / . _ - + only"));
	if (opt.licensing && !is_dir(ctx, *opt.licensing))  // nspawn refuses to start a machine over a missing bind
		return fail(usage_error("--licensing " + *opt.licensing + " is not a directory on this host"));
	const auto module = read_kernel_module(ctx);
	if (!module.version)
		return fail(make_error("No NVIDIA kernel module is loaded on this host (" + module.unknown_reason + ")"));
	auto root_fd = fs::open_dir(ctx.root.empty() ? "/" : ctx.root);
	if (!root_fd)
		return fail(root_fd.error());
	std::vector<std::string> all;
	for (const auto &c : candidate_directories(ctx))
		if (auto canonical = canonical_dir(root_fd->get(), c))
			if (plain_path(*canonical) && std::find(all.begin(), all.end(), *canonical) == all.end())
				all.push_back(*canonical);
	DiscoveryCache cache;
	auto full = discover_over(ctx, all, *module.version, opt.nvoptix, cache);
	if (!full)
		return fail(with_context(full.error(), "Failed to find the driver of the loaded module on this host"));
	HostBinds b;
	b.driver_version = full->version;
	if (full->version != *module.version)
		return fail(make_error("The loaded kernel module is " + *module.version + " but this host's userspace driver is " +
				       full->version + ": a machine given it would not be ready (reboot into the new module, or install its userspace)"));
	auto staging = smallest_set(ctx, all, *full, *module.version, opt.nvoptix, cache);
	if (!staging)
		return fail(staging.error());
	b.staging = *staging;
	auto chosen = discover_over(ctx, b.staging, *module.version, opt.nvoptix, cache);
	if (!chosen)
		return fail(chosen.error());
	b.warnings = chosen->messages;
	b.notes.push_back("Looked for the driver in " + std::to_string(all.size()) + " host directories, " +
			  std::to_string(b.staging.size()) + " of them give the machine all " + std::to_string(full->files.size()) +
			  " files of driver " + full->version);
	for (std::size_t i = 0; i < b.staging.size(); i++)
		b.nspawn.push_back({"Files", "BindReadOnly", b.staging[i] + ":" + STAGING_MOUNT + std::to_string(i)});

	auto inv = devices ? Result<DeviceInventory>(*devices) : enumerate_devices(ctx);
	if (!inv)
		return fail(with_context(inv.error(), "Failed to read this host's NVIDIA devices"));
	b.device_warnings = inv->warnings;
	auto gpus = select_gpus(*inv, opt.gpus);
	if (!gpus)
		return fail(gpus.error());
	add_devices(ctx, *inv, *gpus, b);
	if (opt.licensing)
		b.nspawn.push_back({"Files", "BindReadOnly", normalized(*opt.licensing) + ":" + LICENSING_MOUNT});
	add_exec_lines(ctx, b);
	add_settings(opt, *gpus, b);
	for (const auto &l : b.nspawn)
		if (l.key.starts_with("Bind") && !plain_path(l.value.substr(0, l.value.find(':'))))
			return fail(make_error("Refusing to bind " + l.value + ": a host path of letters, digits and / . _ - + only"));
	return b;
}

std::string device_allow_dropin(const HostBinds &b)
{
	std::string s = "# Written by unbounded-nvidia-host binds: the device cgroup of the machine's unit allows the nodes\n"
			"# its .nspawn file binds (rewritten by each run; see unbounded-nvidia-host(8)).\n[Service]\n";
	for (const auto &d : b.device_allow)
		s += "DeviceAllow=" + d + "\n";
	return s;
}

}  // namespace unbounded::host
