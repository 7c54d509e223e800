#include "node_majors.hpp"

namespace unbounded {
namespace {

// The major /proc/devices gives one of `names`; else `fixed` unless another driver holds it.
std::optional<unsigned> major_of(const std::map<std::string, unsigned> &known, std::initializer_list<const char *> names,
				 std::optional<unsigned> fixed)
{
	for (const char *n : names)
		if (auto it = known.find(n); it != known.end())
			return it->second;
	if (!fixed)
		return std::nullopt;
	for (const auto &[name, major] : known)
		if (major == *fixed)
			return std::nullopt;
	return fixed;
}

}  // namespace

NodeMajors NodeMajors::from(CharMajors &majors)
{
	NodeMajors m;
	const auto &known = majors.get();
	if (!known) {
		m.nvidia = NVIDIA_FIXED_MAJOR;
		m.drm = DRM_FIXED_MAJOR;
		m.uvm_unchecked = true;
		return m;
	}
	m.nvidia = major_of(*known, {"nvidia-frontend", "nvidia"}, NVIDIA_FIXED_MAJOR);
	m.uvm = major_of(*known, {"nvidia-uvm"}, std::nullopt);
	m.drm = major_of(*known, {"drm"}, DRM_FIXED_MAJOR);
	return m;
}

std::optional<DeviceNode> checked_node(const Context &ctx, const std::string &path, const std::optional<unsigned> &major,
				       bool major_unchecked, unsigned minor, const char *driver, std::vector<std::string> &warnings)
{
	auto node = read_device_node(ctx, path);
	if (!node)
		return std::nullopt;
	if (!major && !major_unchecked) {
		warnings.push_back("Ignoring " + path + ": /proc/devices has no " + driver + " major, so its number " +
				   std::to_string(node->major) + ":" + std::to_string(node->minor) + " cannot be checked");
		return std::nullopt;
	}
	if ((major && node->major != *major) || node->minor != minor) {
		warnings.push_back("Ignoring " + path + ": it is " + std::to_string(node->major) + ":" + std::to_string(node->minor) +
				   ", expected " + (major ? std::to_string(*major) : std::string("<") + driver + ">") + ":" +
				   std::to_string(minor) + " (the " + driver + " driver's)");
		return std::nullopt;
	}
	return node;
}

std::optional<unsigned> drm_minor(std::string_view name)
{
	if (auto n = numbered_name(name, "card", 4))
		return n;
	return numbered_name(name, "renderD", 4);
}

}  // namespace unbounded
