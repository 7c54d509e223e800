#include "devices.hpp"

#include "format.hpp"
#include "fabric.hpp"
#include "fs.hpp"
#include "imex.hpp"
#include "ipc.hpp"
#include "mig.hpp"
#include "node_majors.hpp"

#include <algorithm>
#include <functional>
#include <cctype>
#include <charconv>
#include <map>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace unbounded {

std::optional<unsigned> numbered_name(std::string_view name, std::string_view prefix, std::size_t max_digits, unsigned limit)
{
	if (!name.starts_with(prefix))
		return std::nullopt;
	const std::string_view digits = name.substr(prefix.size());
	unsigned n = 0;
	if (!all_digits(digits) || digits.size() > max_digits || (digits.size() > 1 && digits.front() == '0') ||
	    std::from_chars(digits.data(), digits.data() + digits.size(), n).ec != std::errc() || n >= limit)
		return std::nullopt;
	return n;
}

std::optional<DeviceNode> read_device_node(const Context &ctx, const std::string &path)
{
	struct stat st = {};
	if (::lstat(ctx.real(path).c_str(), &st) < 0 || !S_ISCHR(st.st_mode))
		return std::nullopt;
	return DeviceNode{path, ::major(st.st_rdev), ::minor(st.st_rdev), static_cast<unsigned>(st.st_mode & 0777),
			  static_cast<unsigned>(st.st_gid)};
}

namespace {

// "GPU-3f1c0a52-8e4b-4d0e-9c1a-2b7e6d5f4a10" and nothing that is partly unknown.
bool is_complete_gpu_uuid(std::string_view u)
{
	if (!u.starts_with("GPU-"))
		return false;
	u.remove_prefix(4);
	static constexpr std::size_t groups[] = {8, 4, 4, 4, 12};
	for (std::size_t g = 0; g < 5; g++) {
		if (u.size() < groups[g])
			return false;
		for (std::size_t i = 0; i < groups[g]; i++)
			if (!std::isxdigit(static_cast<unsigned char>(u[i])))
				return false;
		u.remove_prefix(groups[g]);
		if (g < 4) {
			if (u.empty() || u.front() != '-')
				return false;
			u.remove_prefix(1);
		}
	}
	return u.empty();
}

std::map<std::string, std::string> parse_information(const std::string &text)
{
	std::map<std::string, std::string> kv;
	std::size_t pos = 0;
	while (pos < text.size()) {
		std::size_t end = text.find('\n', pos);
		if (end == std::string::npos)
			end = text.size();
		const std::string_view line = std::string_view(text).substr(pos, end - pos);
		pos = end + 1;
		auto colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		kv[std::string(trim_blanks(line.substr(0, colon)))] = trim_blanks(line.substr(colon + 1));
	}
	return kv;
}

// DRM nodes of a GPU, as nvidia-ctk adds them: /sys/bus/pci/devices/<pci>/drm/{cardN,renderDN}, when
// the node exists in the machine.
void add_drm_nodes(const Context &ctx, const NodeMajors &nm, Gpu &gpu, std::vector<std::string> &warnings)
{
	if (gpu.pci.empty())
		return;
	auto dir = fs::open_dir(ctx.real("/sys/bus/pci/devices/" + gpu.pci + "/drm"));
	if (!dir)
		return;
	auto names = fs::list_dir(dir->get(), "drm");
	if (!names)
		return;
	for (const auto &n : *names)
		if (auto minor = drm_minor(n))
			if (auto node = checked_node(ctx, "/dev/dri/" + n, nm.drm, false, *minor, "drm", warnings))
				gpu.nodes.push_back(*node);
}

// A device minor: a few digits (stoul-safe).
bool is_minor(std::string_view s) { return all_digits(s) && s.size() < 4; }

}  // namespace

GpuPartition partition_gpus(std::vector<Gpu> listed, const std::function<std::optional<DeviceNode>(unsigned minor)> &node_of)
{
	GpuPartition p;
	std::sort(listed.begin(), listed.end(), [](const Gpu &a, const Gpu &b) { return a.pci < b.pci; });
	for (auto &g : listed) {
		auto node = node_of(g.minor);
		if (!node) {
			p.unbound.push_back(g.pci);
			continue;
		}
		g.nodes.insert(g.nodes.begin(), *node);
		p.bound.push_back(std::move(g));
	}
	return p;
}

namespace {

// The control nodes (CONTROL_NODES) that are there and pass their check; the two CUDA needs are
// warned about when missing.
void add_control_nodes(const Context &ctx, const NodeMajors &nm, DeviceInventory &inv)
{
	for (const char *p : CONTROL_NODES) {
		const std::string_view name(p);
		const bool uvm = name.starts_with("/dev/nvidia-uvm");
		const unsigned minor = name == "/dev/nvidiactl"        ? 255
				       : name == "/dev/nvidia-modeset" ? 254
				       : name == "/dev/nvidia-uvm"     ? 0
								       : 1;
		const std::size_t warned = inv.warnings.size();
		if (auto n = checked_node(ctx, p, uvm ? nm.uvm : nm.nvidia, uvm && nm.uvm_unchecked, minor,
					  uvm ? "nvidia-uvm" : "nvidia-frontend", inv.warnings))
			inv.control.push_back(*n);
		else if (inv.warnings.size() == warned && (name == "/dev/nvidiactl" || name == "/dev/nvidia-uvm"))
			inv.warnings.push_back(std::string(p) + " is missing or not a character device; CUDA needs it: bind the host's " + p +
					       " into the machine (Bind= and DeviceAllow=, see the host recipes)");
	}
}

// The GPUs /proc/driver/nvidia/gpus lists (open as `dirfd`), in bus order, without those the driver
// excludes (a warning each).
Result<std::vector<Gpu>> list_proc_gpus(const Context &ctx, int dirfd, const std::string &gpus_dir, std::vector<std::string> &warnings)
{
	std::vector<Gpu> listed;
	auto names = fs::list_dir(dirfd, gpus_dir);  // sorted: fixed-width hex bus ids sort in bus order
	if (!names)
		return fail(names.error());
	for (const auto &pci : *names) {
		const std::string info_path = gpus_dir + "/" + pci + "/information";
		auto text = fs::read_file(ctx.real(info_path), 64 * 1024);
		if (!text)
			return fail(text.error());
		auto kv = parse_information(*text);
		if (kv["GPU Excluded"] == "Yes") {
			warnings.push_back("GPU " + pci + " is excluded by the driver, skipping it");
			continue;
		}
		auto minor_it = kv.find("Device Minor");
		if (minor_it == kv.end() || !is_minor(minor_it->second))
			return fail(make_error("Failed to parse " + info_path + ": no valid 'Device Minor'"));
		Gpu g;
		g.pci = pci;
		g.minor = static_cast<unsigned>(std::stoul(minor_it->second));
		if (auto u = kv.find("GPU UUID"); u != kv.end() && is_complete_gpu_uuid(u->second))
			g.uuid = u->second;
		listed.push_back(std::move(g));
	}
	return listed;
}

// The minors of the GPU nodes /dev holds (/dev/nvidia<N>), in order.
std::vector<unsigned> dev_gpu_minors(const std::vector<std::string> &dev_names)
{
	std::vector<unsigned> minors;
	for (const auto &n : dev_names)
		if (n.starts_with("nvidia") && is_minor(std::string_view(n).substr(6)))
			minors.push_back(static_cast<unsigned>(std::stoul(n.substr(6))));
	std::sort(minors.begin(), minors.end());
	return minors;
}

// GPUs /proc lists without their node in this machine: not offered (a warning), or the failure
// when no GPU is left.
Result<void> leave_unbound(DeviceInventory &inv, std::vector<std::string> unbound, std::size_t listed_count, const std::string &gpus_dir,
			   const std::function<std::string()> &refusals)
{
	std::string which;
	for (const auto &u : unbound)
		which += (which.empty() ? "" : ", ") + u;
	if (inv.gpus.empty())
		return fail(make_error("None of the " + std::to_string(listed_count) + " GPU(s) in " + gpus_dir +
					       " has its /dev/nvidia<minor> in this machine (" + which +
					       "): bind the host's /dev/nvidia<N> of the GPUs this machine is given" + refusals(),
				       EXIT_NOT_READY, ENOENT));
	inv.unbound_gpus = std::move(unbound);
	inv.warnings.push_back(std::to_string(inv.unbound_gpus.size()) + " of the " + std::to_string(listed_count) + " GPU(s) in " +
			       gpus_dir + " have no /dev/nvidia<minor> in this machine and are not offered (" + which +
			       "): the host gave them to another machine, or did not bind them");
	return {};
}

// The GPUs of /proc/driver/nvidia/gpus (open as `dirfd`) that have their node here (`gpu_node`),
// their DRM nodes, and their MIG devices (`majors` not const: add_mig_devices looks up more in it).
Result<void> add_proc_gpus(const Context &ctx, CharMajors &majors, const NodeMajors &nm, int dirfd, const std::string &gpus_dir,
			   const std::function<std::optional<DeviceNode>(unsigned minor)> &gpu_node,
			   const std::function<std::string()> &refusals, DeviceInventory &inv)
{
	inv.source = "proc";
	auto proc_gpus = list_proc_gpus(ctx, dirfd, gpus_dir, inv.warnings);
	if (!proc_gpus)
		return fail(proc_gpus.error());
	const std::size_t listed_count = proc_gpus->size();
	auto parts = partition_gpus(std::move(*proc_gpus), gpu_node);
	inv.gpus = std::move(parts.bound);
	for (auto &g : inv.gpus)
		add_drm_nodes(ctx, nm, g, inv.warnings);
	inv.listed_gpus = listed_count;
	if (!parts.unbound.empty())
		if (auto r = leave_unbound(inv, std::move(parts.unbound), listed_count, gpus_dir, refusals); !r)
			return fail(r.error());
	if (auto r = add_mig_devices(ctx, majors, inv); !r)
		return fail(r.error());
	return {};
}

}  // namespace

Result<DeviceInventory> enumerate_devices(const Context &ctx)
{
	DeviceInventory inv;
	CharMajors majors(ctx);  // /proc/devices, read once: every node is checked against its driver's major
	// /dev, listed once: the GPU nodes when /proc has no GPUs, and the fabric devices.
	std::vector<std::string> dev_names;
	if (auto dev = fs::open_dir(ctx.real("/dev"))) {
		auto names = fs::list_dir(dev->get(), "/dev");
		if (!names)
			return fail(names.error());
		dev_names = std::move(*names);
	}
	const NodeMajors nm = NodeMajors::from(majors);
	// The GPU nodes: /dev/nvidia<N> of minor N; 254 and 255 are modeset's and the control node's.
	// Those refused are warnings, or part of the failure when no GPU is left.
	std::vector<std::string> refused;
	const std::function<std::optional<DeviceNode>(unsigned minor)> gpu_node = [&](unsigned minor) -> std::optional<DeviceNode> {
		const std::string path = "/dev/nvidia" + std::to_string(minor);
		if (minor >= 254) {
			if (read_device_node(ctx, path))
				refused.push_back("Ignoring " + path + ": minor " + std::to_string(minor) +
						  " is the NVIDIA driver's modeset or control node, not a GPU");
			return std::nullopt;
		}
		return checked_node(ctx, path, nm.nvidia, false, minor, "nvidia-frontend", refused);
	};
	const std::function<std::string()> refusals = [&] {
		std::string all;
		for (const auto &r : refused)
			all += "; " + r;
		return all;
	};
	add_control_nodes(ctx, nm, inv);

	const std::string gpus_dir = "/proc/driver/nvidia/gpus";
	auto dir = fs::open_dir(ctx.real(gpus_dir));
	if (dir) {
		if (auto r = add_proc_gpus(ctx, majors, nm, dir->get(), gpus_dir, gpu_node, refusals, inv); !r)
			return fail(r.error());
	} else {
		// No /proc/driver/nvidia here (a container without it): the GPU nodes are the inventory.
		inv.source = "dev";
		for (unsigned m : dev_gpu_minors(dev_names)) {
			auto node = gpu_node(m);
			if (!node)
				continue;
			Gpu g;
			g.minor = m;
			g.nodes.push_back(*node);
			inv.gpus.push_back(std::move(g));
		}
	}
	if (inv.gpus.empty())
		return fail(make_error(std::string("No GPUs found in ") + (inv.source == "proc" ? gpus_dir : "/dev/nvidia<N>") + refusals(),
				       EXIT_NOT_READY, ENODEV));
	inv.warnings.insert(inv.warnings.end(), refused.begin(), refused.end());
	auto channels = enumerate_imex_channels(ctx, majors, inv.warnings);
	if (!channels)
		return fail(channels.error());
	inv.imex_channels = std::move(*channels);
	inv.fabric = enumerate_fabric(ctx, majors, dev_names, inv.warnings);
	if (ctx.config.ipc_sockets)
		inv.ipc = enumerate_ipc(ctx, inv.warnings);
	return inv;
}

}  // namespace unbounded
