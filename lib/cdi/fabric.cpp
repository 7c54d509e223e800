#include "fabric.hpp"

#include "fs.hpp"
#include "side_specs.hpp"

#include <algorithm>
#include <sys/stat.h>

namespace unbounded {
namespace {

struct FabricClass {
	const char *kind;
	const char *driver;  // its name in /proc/devices
	const char *what;    // for warnings
	// The minor a /dev entry of this class must have, nullopt when the name is not of the class.
	std::optional<unsigned> (*minor_of)(std::string_view name);
	std::vector<const char *> mounts;  // machine paths, mounted while the class has nodes
};

// The nvswitch driver's control node is minor 255 (NVSWITCH_CTL_MINOR), its switches 0..254.
std::optional<unsigned> nvswitch_minor(std::string_view name)
{
	if (name == "nvidia-nvswitchctl")
		return 255u;
	return numbered_name(name, "nvidia-nvswitch", 3, 255);
}

std::optional<unsigned> gdrcopy_minor(std::string_view name)
{
	return name == "gdrdrv" ? std::optional<unsigned>(0) : std::nullopt;
}

std::optional<unsigned> gds_minor(std::string_view name) { return numbered_name(name, "nvidia-fs", 3, 256); }

const FabricClass &fabric_class(std::size_t i)
{
	static const FabricClass classes[] = {
		{NVSWITCH_CDI_KIND, "nvidia-nvswitch", "NVSwitch", nvswitch_minor, {}},
		{GDRCOPY_CDI_KIND, "gdrdrv", "GDRCopy", gdrcopy_minor, {}},
		{GDS_CDI_KIND, "nvidia-fs", "GPUDirect Storage", gds_minor, {"/etc/cufile.json", "/run/udev"}},
	};
	return classes[i];
}
constexpr std::size_t FABRIC_CLASSES = 3;

// What a GDS mount must be: the machine's own file or directory, never a link out of it.
bool mountable(const Context &ctx, const std::string &path, std::vector<std::string> &warnings)
{
	struct stat st = {};
	if (::lstat(ctx.real(path).c_str(), &st) < 0)
		return false;
	const bool dir = path == "/run/udev";
	if (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
		return true;
	warnings.push_back("Not mounting " + path + " for GPUDirect Storage: it is " + fs::file_type_name(st.st_mode) + ", not a " +
			   (dir ? "directory" : "regular file"));
	return false;
}

}  // namespace

std::vector<FabricDevices> enumerate_fabric(const Context &ctx, CharMajors &majors, const std::vector<std::string> &dev_names,
					    std::vector<std::string> &warnings)
{
	std::vector<FabricDevices> out;
	for (std::size_t i = 0; i < FABRIC_CLASSES; i++) {
		const FabricClass &c = fabric_class(i);
		std::vector<std::pair<std::string, unsigned>> named;  // (name, minor)
		for (const auto &n : dev_names)
			if (auto minor = c.minor_of(n))
				named.emplace_back(n, *minor);
		if (named.empty())
			continue;
		std::optional<unsigned> major;
		if (const auto &known = majors.get())
			if (auto it = known->find(c.driver); it != known->end())
				major = it->second;
		if (!major) {
			warnings.push_back(std::string(c.what) + " devices are not offered: /proc/devices has no " + c.driver +
					   " major, so /dev/" + named.front().first + " and the others cannot be checked");
			continue;
		}
		FabricDevices f;
		f.kind = c.kind;
		for (const auto &[name, minor] : named) {
			const std::string path = "/dev/" + name;
			auto node = read_device_node(ctx, path);
			if (!node) {
				warnings.push_back("Ignoring " + path + ": not a character device");
				continue;
			}
			if (node->major != *major || node->minor != minor) {
				warnings.push_back("Ignoring " + path + ": it is " + std::to_string(node->major) + ":" + std::to_string(node->minor) +
						   ", expected " + std::to_string(*major) + ":" + std::to_string(minor));
				continue;
			}
			f.nodes.push_back(*node);
		}
		if (f.nodes.empty())
			continue;
		std::sort(f.nodes.begin(), f.nodes.end(), [](const DeviceNode &a, const DeviceNode &b) { return a.path < b.path; });
		for (const char *m : c.mounts)
			if (mountable(ctx, m, warnings))
				f.mounts.emplace_back(m);
		out.push_back(std::move(f));
	}
	return out;
}

}  // namespace unbounded
