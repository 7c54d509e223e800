#include "preflight.hpp"

#include "chase.hpp"
#include "devices.hpp"
#include "driver_discovery.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "host_binds.hpp"
#include "kernel_module.hpp"

#include <algorithm>
#include <charconv>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>

namespace unbounded::host {

namespace {

constexpr std::size_t SMALL_FILE = 4096;  // sysfs attributes, /proc/<pid>/comm

struct Checker {
	const Context &ctx;
	Preflight out;
	std::optional<DeviceInventory> devices;  // read once by nodes(), planned with by userspace()

	void error(const char *check, std::string message) { out.findings.push_back({true, check, std::move(message)}); }
	void warning(const char *check, std::string message) { out.findings.push_back({false, check, std::move(message)}); }

	bool exists(const std::string &path, mode_t type) const
	{
		struct stat st = {};
		return ::lstat(ctx.real(path).c_str(), &st) == 0 && (st.st_mode & S_IFMT) == type;
	}

	// Whether the directory `dir` lists a name that starts with `prefix` ("": any name).
	bool lists(const std::string &dir, std::string_view prefix) const
	{
		auto d = fs::open_dir(ctx.real(dir));
		auto names = d ? fs::list_dir(d->get(), dir) : fail(d.error());
		return names && std::any_of(names->begin(), names->end(), [&](const std::string &n) { return n.starts_with(prefix); });
	}

	// First line of a small attribute file, or "" (a symlink, a FIFO, a huge file: the reader refuses them).
	static std::string attribute(int dirfd, const std::string &name, const std::string &display)
	{
		auto text = fs::read_file_at(dirfd, name, display, SMALL_FILE);
		if (!text)
			return {};
		return text->substr(0, text->find('\n'));
	}

	void pci();
	void modules();
	void nodes();
	void userspace();
	void daemons();
	bool process_running(std::string_view comm) const;
};

// "0000:18:00.0", or a wider domain ("10000:e1:00.0" behind Intel VMD): the names /sys/bus/pci/devices has.
bool pci_name(std::string_view n)
{
	const std::size_t d = n.size() - 8;  // the domain's digits, before ":bb:dd.f"
	return n.size() >= 12 && n.size() <= 16 && n[d] == ':' && n[d + 3] == ':' && n[d + 6] == '.' &&
	       std::all_of(n.begin(), n.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; });
}

void Checker::pci()
{
	const std::string dir = "/sys/bus/pci/devices";
	auto root = fs::open_dir(ctx.root.empty() ? "/" : ctx.root);
	auto d = fs::open_dir(ctx.real(dir));
	if (!root || !d) {
		error("pci", "Failed to read " + dir + ": " + (d ? root.error().message : d.error().message));
		return;
	}
	auto names = fs::list_dir(d->get(), dir);
	if (!names) {
		error("pci", names.error().message);
		return;
	}
	std::size_t seen = 0, nvidia = 0;
	for (const auto &n : *names) {
		if (!pci_name(n))
			continue;
		if (++seen > MAX_PCI_FUNCTIONS) {
			warning("pci", dir + " lists more than " + std::to_string(MAX_PCI_FUNCTIONS) + " functions; the rest were not checked");
			break;
		}
		// Each entry is a symlink into /sys/devices: followed, but never out of the root.
		auto dev = chase(root->get(), dir + "/" + n, ChaseHow{Chase::InRoot | Chase::OpenLast, nullptr, {}});
		if (!dev || !S_ISDIR(dev->st.st_mode))
			continue;
		UniqueFd fd(::openat(dev->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		if (!fd)
			continue;
		const std::string display = dir + "/" + n;
		if (attribute(fd.get(), "vendor", display + "/vendor") != "0x10de")
			continue;
		const std::string cls = attribute(fd.get(), "class", display + "/class");
		if (!cls.starts_with("0x03"))  // display controllers: VGA 0x0300, 3D 0x0302, other 0x0380
			continue;
		nvidia++;
		auto driver = fs::read_link_at(fd.get(), "driver", display + "/driver");
		const std::string bound = driver ? fs::basename(*driver) : "";
		if (bound != "nvidia")
			error("pci", "PCI function " + n + " (NVIDIA, class " + cls + ") is bound to " +
					     (bound.empty() ? std::string("no driver") : bound) + ", not nvidia: no machine can use it");
	}
	if (nvidia == 0)
		error("pci", "No NVIDIA display or 3D controller in " + dir);
}

void Checker::modules()
{
	for (const char *m : {"nvidia", "nvidia_uvm"})
		if (!exists(std::string("/sys/module/") + m, S_IFDIR))
			error("modules", std::string("Kernel module ") + m + " is not loaded (/sys/module/" + m + " is missing)");
	// Headless datacenter hosts often leave it out: CUDA does not need it, only display and DRM do.
	if (!exists("/sys/module/nvidia_modeset", S_IFDIR))
		warning("modules", "Kernel module nvidia_modeset is not loaded (/sys/module/nvidia_modeset is missing): fine for compute, "
				   "pods that display or use DRM need it");
	if (lists("/dev/dri", "card") && !exists("/sys/module/nvidia_drm", S_IFDIR))
		warning("modules", "/dev/dri has DRM nodes but nvidia_drm is not loaded: pods that render get no NVIDIA DRM device");
}

void Checker::nodes()
{
	auto inv = enumerate_devices(ctx);
	if (!inv) {
		error("nodes", inv.error().message);
		return;
	}
	devices = *inv;
	for (const char *path : {"/dev/nvidiactl", "/dev/nvidia-uvm"})
		if (std::none_of(inv->control.begin(), inv->control.end(), [&](const DeviceNode &n) { return n.path == path; }))
			error("nodes", std::string(path) + " is missing or not the driver's (nvidia-modprobe, or the driver's udev rules, make it)");
	for (const auto &pci : inv->unbound_gpus)
		error("nodes", "GPU " + pci + " has no /dev/nvidia<minor> node of the driver's major");
	for (const auto &w : inv->warnings)
		if (w.starts_with("Ignoring /dev/"))
			error("nodes", w);
	if (inv->source != "proc")
		error("nodes", "/proc/driver/nvidia/gpus is missing: the driver lists no GPU");
}

void Checker::userspace()
{
	const auto module = read_kernel_module(ctx);
	if (!module.version) {
		error("userspace", "No NVIDIA kernel module version (" + module.unknown_reason + ")");
		return;
	}
	out.driver_version = *module.version;
	BindsOptions opt;
	auto b = plan_binds(ctx, opt, devices ? &*devices : nullptr);
	if (!b) {
		error("userspace", b.error().message);
		return;
	}
	for (const auto &w : b->warnings) {
		if (w.find("GSP firmware") != std::string::npos) {
			const bool open_module = [&] {
				auto text = fs::read_file(ctx.real(PROC_DRIVER_VERSION), 64 * 1024);
				return text && text->find("Open Kernel Module") != std::string::npos;
			}();
			// The open kernel module runs the GPU through GSP: without the firmware it does not initialise.
			if (open_module)
				error("firmware", w + " (the open kernel module needs it)");
			else
				warning("firmware", w);
		} else {
			warning("userspace", w);
		}
	}
}

// `comm` as the kernel keeps it: the first 15 bytes of the program's name.
bool Checker::process_running(std::string_view comm) const
{
	auto proc = fs::open_dir(ctx.real("/proc"));
	if (!proc)
		return false;
	auto names = fs::list_dir_once(proc->get(), "/proc");
	if (!names)
		return false;
	std::size_t seen = 0;
	for (const auto &n : *names) {
		if (!all_digits(n) || ++seen > MAX_PROCESSES)
			continue;
		UniqueFd pid(::openat(proc->get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (pid && attribute(pid.get(), "comm", "/proc/" + n + "/comm") == comm)
			return true;
	}
	return false;
}

void Checker::daemons()
{
	if (!exists("/run/nvidia-persistenced/socket", S_IFSOCK) && !process_running("nvidia-persiste"))
		warning("persistence", "nvidia-persistenced is not running (no /run/nvidia-persistenced/socket): each pod's start "
				       "initialises the GPUs again, and the driver may forget their state between pods");
	if (lists("/dev", "nvidia-nvswitch") && !exists("/run/nvidia-fabricmanager/socket", S_IFSOCK) && !process_running("nv-fabricmanage"))
		error("fabric", "This host has NVSwitches (/dev/nvidia-nvswitch*) but the fabric manager is not running: CUDA fails to "
				"initialise until nvidia-fabricmanager.service is started");
	if (lists("/dev/nvidia-caps-imex-channels", "") && !process_running("nvidia-imex"))
		warning("fabric", "IMEX channels exist (/dev/nvidia-caps-imex-channels) but no nvidia-imex daemon runs on the host: "
				  "multi-node NVLink memory sharing needs it here or in a ComputeDomain daemon");
}

}  // namespace

bool Preflight::ready() const
{
	return std::none_of(findings.begin(), findings.end(), [](const Finding &f) { return f.error; });
}

Preflight run_preflight(const Context &ctx)
{
	Checker c{ctx, {}, {}};
	c.pci();
	c.modules();
	c.nodes();
	c.userspace();
	c.daemons();
	return std::move(c.out);
}

}  // namespace unbounded::host
