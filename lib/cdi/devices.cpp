#include "devices.hpp"

#include "format.hpp"
#include "fabric.hpp"
#include "fs.hpp"
#include "imex.hpp"
#include "ipc.hpp"
#include "mig.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace unbounded {

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

std::optional<DeviceNode> read_device_node(const Context &ctx, const std::string &path)
{
	struct stat st{};
	if (::lstat(ctx.real(path).c_str(), &st) < 0 || !S_ISCHR(st.st_mode))
		return std::nullopt;
	return DeviceNode{path, ::major(st.st_rdev), ::minor(st.st_rdev), static_cast<unsigned>(st.st_mode & 0777),
			  static_cast<unsigned>(st.st_gid)};
}

namespace {

std::map<std::string, std::string> parse_information(const std::string &text)
{
	std::map<std::string, std::string> kv;
	std::size_t pos = 0;
	while (pos < text.size()) {
		std::size_t end = text.find('\n', pos);
		if (end == std::string::npos)
			end = text.size();
		std::string line = text.substr(pos, end - pos);
		pos = end + 1;
		auto colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		auto trim = [](std::string s) {
			auto b = s.find_first_not_of(" \t\r");
			auto e = s.find_last_not_of(" \t\r");
			return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
		};
		kv[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
	}
	return kv;
}

// DRM nodes of a GPU, as nvidia-ctk adds them: /sys/bus/pci/devices/<pci>/drm/{cardN,renderDN}, when
// the node exists in the machine.
void add_drm_nodes(const Context &ctx, Gpu &gpu)
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
		if (n.starts_with("card") || n.starts_with("renderD"))
			if (auto node = read_device_node(ctx, "/dev/dri/" + n))
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

Result<DeviceInventory> enumerate_devices(const Context &ctx)
{
	DeviceInventory inv;
	CharMajors majors(ctx);  // /proc/devices, read once if MIG, IMEX or a fabric device needs it
	// /dev, listed once: the GPU nodes when /proc has no GPUs, and the fabric devices.
	std::vector<std::string> dev_names;
	if (auto dev = fs::open_dir(ctx.real("/dev"))) {
		auto names = fs::list_dir(dev->get(), "/dev");
		if (!names)
			return fail(names.error());
		dev_names = std::move(*names);
	}
	for (const char *p : CONTROL_NODES)
		if (auto n = read_device_node(ctx, p))
			inv.control.push_back(*n);
		else if (std::string_view(p) == "/dev/nvidiactl" || std::string_view(p) == "/dev/nvidia-uvm")
			inv.warnings.push_back(std::string(p) + " is missing or not a character device; CUDA needs it: bind the host's " + p +
					       " into the machine (Bind= and DeviceAllow=, see the host recipes)");

	const std::string gpus_dir = "/proc/driver/nvidia/gpus";
	auto dir = fs::open_dir(ctx.real(gpus_dir));
	if (dir) {
		inv.source = "proc";
		std::vector<Gpu> listed;
		auto names = fs::list_dir(dir->get(), gpus_dir);  // sorted: fixed-width hex bus ids sort in bus order
		if (!names)
			return fail(names.error());
		for (const auto &pci : *names) {
			const std::string info_path = gpus_dir + "/" + pci + "/information";
			auto text = fs::read_file(ctx.real(info_path), 64 * 1024);
			if (!text)
				return fail(text.error());
			auto kv = parse_information(*text);
			if (kv["GPU Excluded"] == "Yes") {
				inv.warnings.push_back("GPU " + pci + " is excluded by the driver, skipping it");
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
		const std::size_t listed_count = listed.size();
		auto parts = partition_gpus(std::move(listed), [&](unsigned minor) { return read_device_node(ctx, "/dev/nvidia" + std::to_string(minor)); });
		inv.gpus = std::move(parts.bound);
		for (auto &g : inv.gpus)
			add_drm_nodes(ctx, g);
		inv.listed_gpus = listed_count;
		if (!parts.unbound.empty()) {
			std::string which;
			for (const auto &u : parts.unbound)
				which += (which.empty() ? "" : ", ") + u;
			if (inv.gpus.empty())
				return fail(make_error("None of the " + std::to_string(listed_count) + " GPU(s) in " + gpus_dir +
						       " has its /dev/nvidia<minor> in this machine (" + which +
						       "): bind the host's /dev/nvidia<N> of the GPUs this machine is given",
						       EXIT_NOT_READY, ENOENT));
			inv.unbound_gpus = std::move(parts.unbound);
			inv.warnings.push_back(std::to_string(inv.unbound_gpus.size()) + " of the " + std::to_string(listed_count) + " GPU(s) in " +
					       gpus_dir + " have no /dev/nvidia<minor> in this machine and are not offered (" + which +
					       "): the host gave them to another machine, or did not bind them");
		}
		if (auto r = add_mig_devices(ctx, majors, inv); !r)
			return fail(r.error());
	} else {
		// No /proc/driver/nvidia here (a container without it): the GPU nodes are the inventory.
		inv.source = "dev";
		{
			std::vector<unsigned> minors;
			for (const auto &n : dev_names)
				if (n.starts_with("nvidia") && is_minor(std::string_view(n).substr(6)))
					minors.push_back(static_cast<unsigned>(std::stoul(n.substr(6))));
			std::sort(minors.begin(), minors.end());
			for (unsigned m : minors) {
				auto node = read_device_node(ctx, "/dev/nvidia" + std::to_string(m));
				if (!node)
					continue;
				Gpu g;
				g.minor = m;
				g.nodes.push_back(*node);
				inv.gpus.push_back(std::move(g));
			}
		}
	}
	if (inv.gpus.empty())
		return fail(make_error(std::string("No GPUs found in ") + (inv.source == "proc" ? gpus_dir : "/dev/nvidia<N>"),
				       EXIT_NOT_READY, ENODEV));
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
