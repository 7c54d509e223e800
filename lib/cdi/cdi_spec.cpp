#include "cdi_spec.hpp"

#include "format.hpp"
#include "fs.hpp"
#include "spec_marker.hpp"

#include <algorithm>
#include <set>
#include "yaml_emit.hpp"

namespace unbounded {
namespace {

struct Mount {
	std::string host, container;
};

// What one set of container edits holds; devices and the top level share the emitter.
struct Edits {
	std::vector<std::string> env;
	std::vector<DeviceNode> nodes;
	std::vector<std::vector<std::string>> hooks;  // argv of each createContainer hook
	std::vector<Mount> mounts;
	std::set<unsigned> additional_gids;
};

// nvidia-ctk (internal/edits/device.go): a node owned by a non-root group and not world read-write
// needs that group in the container, which makes the spec 0.7.0.
void add_node(Edits &e, const DeviceNode &n)
{
	e.nodes.push_back(n);
	if (n.gid != 0 && (n.mode & 0006) != 0006)
		e.additional_gids.insert(n.gid);
}

nlohmann::ordered_json edits_json(const Edits &e, const std::optional<std::string> &hook_path)
{
	nlohmann::ordered_json j = nlohmann::ordered_json::object();
	if (!e.env.empty())
		j["env"] = e.env;
	if (!e.nodes.empty()) {
		auto &nodes = j["deviceNodes"] = nlohmann::ordered_json::array();
		for (const auto &n : e.nodes) {
			nlohmann::ordered_json d;
			d["path"] = n.path;
			if (n.major)  // omitempty, as in the CDI Go types
				d["major"] = n.major;
			if (n.minor)
				d["minor"] = n.minor;
			d["fileMode"] = n.mode;
			d["permissions"] = "rwm";
			if (n.gid)
				d["gid"] = n.gid;
			nodes.push_back(std::move(d));
		}
	}
	if (!e.hooks.empty() && hook_path) {
		auto &hooks = j["hooks"] = nlohmann::ordered_json::array();
		for (const auto &argv : e.hooks) {
			nlohmann::ordered_json h;
			h["hookName"] = "createContainer";
			h["path"] = *hook_path;
			h["args"] = argv;
			h["env"] = {"NVIDIA_CTK_DEBUG=false"};
			hooks.push_back(std::move(h));
		}
	}
	if (!e.mounts.empty()) {
		auto &mounts = j["mounts"] = nlohmann::ordered_json::array();
		for (const auto &m : e.mounts) {
			nlohmann::ordered_json o;
			o["hostPath"] = m.host;
			o["containerPath"] = m.container;
			o["options"] = CDI_MOUNT_OPTIONS;
			mounts.push_back(std::move(o));
		}
	}
	if (!e.additional_gids.empty())
		j["additionalGids"] = e.additional_gids;
	return j;
}

std::size_t depth(const std::string &p) { return static_cast<std::size_t>(std::count(p.begin(), p.end(), '/')); }

}  // namespace

namespace {

// create-symlinks: every symlink of the driver root (SONAME links, libcuda.so, ...) plus GLVND's
// indirect GLX entry point.
std::vector<std::string> create_symlinks_hook(const Manifest &m, const std::string &hook, const std::string &libdir,
					      const std::set<std::string> &files)
{
	std::vector<std::string> argv{fs::basename(hook), "create-symlinks"};
	std::vector<std::pair<std::string, std::string>> links;
	for (const auto &e : m.entries)
		if (e.type == ManifestEntry::Type::Link)
			links.emplace_back(e.target, "/" + e.path);
	const std::string glx = "lib/" + m.multiarch + "/libGLX_nvidia.so." + m.driver_version;
	if (files.count(glx))
		links.emplace_back(fs::basename(glx), libdir + "/libGLX_indirect.so.0");
	std::sort(links.begin(), links.end(), [](const auto &a, const auto &b) { return a.second < b.second; });
	for (const auto &[target, link] : links) {
		argv.push_back("--link");
		argv.push_back(target + "::" + link);
	}
	return argv;
}

// With the hook: the links it recreates in the container, CUDA compat, the ld cache, and no device
// node changes; each only when the installed hook has that subcommand (`has`).
void add_hooks(Edits &common, const Manifest &m, const std::string &hook, const std::set<std::string> &has, const std::string &libdir,
	       const std::set<std::string> &files)
{
	if (has.count("create-symlinks"))
		common.hooks.push_back(create_symlinks_hook(m, hook, libdir, files));
	if (has.count("enable-cuda-compat"))
		common.hooks.push_back({fs::basename(hook), "enable-cuda-compat", "--host-driver-version=" + m.driver_version});
	if (has.count("update-ldcache")) {
		std::vector<std::string> ldcache{fs::basename(hook), "update-ldcache", "--folder", libdir};
		bool has_vdpau = false;
		for (const auto &e : m.entries)
			has_vdpau |= e.path.starts_with("lib/" + m.multiarch + "/vdpau/");
		if (has_vdpau) {
			ldcache.push_back("--folder");
			ldcache.push_back(libdir + "/vdpau");
		}
		common.hooks.push_back(std::move(ldcache));
	}
	if (has.count("disable-device-node-modification"))
		common.hooks.push_back({fs::basename(hook), "disable-device-node-modification"});
}

// The file a link of the root leads to, relative to the root: "dir/../file" normalised (the gbm
// link), link chains followed (libcuda.so -> .so.1 -> .so.<v>).
std::string link_target_file(const Manifest &m, const ManifestEntry &link)
{
	std::string target_rel = fs::join(fs::dirname(link.path), link.target);
	for (int hops = 0; hops < 8; hops++) {
		std::vector<std::string> parts;
		for (auto &c : fs::split_path(target_rel)) {
			if (c == ".." && !parts.empty())
				parts.pop_back();
			else if (c != "." && c != "..")
				parts.push_back(c);
		}
		target_rel.clear();
		for (const auto &p : parts)
			target_rel = fs::join(target_rel, p);
		const ManifestEntry *t = m.find(target_rel);
		if (!t || t->type == ManifestEntry::Type::File)
			break;
		target_rel = fs::join(fs::dirname(target_rel), t->target);
	}
	return target_rel;
}

// Without the hook nobody creates libcuda.so.1 and friends in the container: the files are bound at
// their link names too, so dlopen("libcuda.so.1") works anyway.
void add_link_mounts(Edits &common, const Manifest &m, const std::string &driver_root, const std::set<std::string> &files)
{
	for (const auto &e : m.entries) {
		if (e.type != ManifestEntry::Type::Link)
			continue;
		const std::string target_rel = link_target_file(m, e);
		if (files.count(target_rel))
			common.mounts.push_back(Mount{fs::join(driver_root, target_rel), "/" + e.path});
	}
}

// Images of the Red Hat family (UBI, Rocky, Alma, Fedora) never search /lib/<multiarch>/: their
// loader's default directories are /lib64 and /usr/lib64, on x86_64 and aarch64 alike, and their
// ld.so.cache was built with the image. Without the update-ldcache hook, which adds the driver's
// directory to the container's cache, nothing tells their loader where libcuda.so.1 is: each
// library link of the driver's lib dir (the names the loader and dlopen() look for) is bound into
// /usr/lib64 as well. In a Debian-family image /usr/lib64 is searched by nobody and the extra
// names are harmless.
constexpr const char *LIB64_DIR = "/usr/lib64";

void add_lib64_mounts(Edits &common, const Manifest &m, const std::string &driver_root, const std::set<std::string> &files)
{
	const std::string libdir = "lib/" + m.multiarch + "/";
	for (const auto &e : m.entries) {
		if (e.type != ManifestEntry::Type::Link || !e.path.starts_with(libdir) || e.path.find('/', libdir.size()) != std::string::npos)
			continue;
		const std::string target_rel = link_target_file(m, e);
		if (files.count(target_rel))
			common.mounts.push_back(Mount{fs::join(driver_root, target_rel), std::string(LIB64_DIR) + "/" + fs::basename(e.path)});
	}
}

// Devices: by index, by UUID where fully known, and "all"; sorted by name as nvidia-ctk does. A
// MIG-enabled GPU offers its compute instances instead of itself, "<gpu-index>:<mig-index>" with
// mig-index counting its instances in (GI, CI) order; "all" is the union of every device's nodes.
std::vector<std::pair<std::string, Edits>> device_edits(const DeviceInventory &inv)
{
	std::vector<std::pair<std::string, Edits>> devices;
	Edits all;
	std::set<std::string> in_all;
	auto add = [&](Edits &e, const DeviceNode &n) {
		add_node(e, n);
		if (in_all.insert(n.path).second)
			add_node(all, n);
	};
	for (std::size_t i = 0; i < inv.gpus.size(); i++) {
		const Gpu &g = inv.gpus[i];
		for (std::size_t j = 0; j < g.migs.size(); j++) {
			Edits e;
			add(e, g.nodes.front());  // /dev/nvidiaN; DRM nodes only belong to "gfx" instances
			add(e, g.migs[j].gi_access);
			add(e, g.migs[j].ci_access);
			devices.emplace_back(std::to_string(i) + ":" + std::to_string(j), std::move(e));
		}
		if (g.mig_enabled)
			continue;
		Edits e;
		for (const auto &n : g.nodes)
			add(e, n);
		devices.emplace_back(std::to_string(i), e);
		if (g.uuid)
			devices.emplace_back(*g.uuid, e);
	}
	std::sort(devices.begin(), devices.end(), [](const auto &a, const auto &b) { return numeric_name_less(a.first, b.first); });
	devices.emplace_back("all", all);
	return devices;
}

// The lowest cdiVersion the content needs: names starting with a digit need 0.5.0, additionalGids
// 0.7.0 (CDI specs-go/version.go).
std::string lowest_cdi_version(const Edits &common, const std::vector<std::pair<std::string, Edits>> &devices)
{
	bool gids = !common.additional_gids.empty();
	for (const auto &[name, e] : devices)
		gids |= !e.additional_gids.empty();
	return gids ? "0.7.0" : "0.5.0";
}

nlohmann::ordered_json spec_document(const std::string &version, const char *kind, const std::vector<std::pair<std::string, Edits>> &devices,
				     const std::optional<std::string> &hook_path, std::size_t &device_nodes)
{
	nlohmann::ordered_json doc;
	doc["cdiVersion"] = version;
	doc["kind"] = kind;
	auto &devs = doc["devices"] = nlohmann::ordered_json::array();
	for (const auto &[name, e] : devices) {
		nlohmann::ordered_json d;
		d["name"] = name;
		d["containerEdits"] = edits_json(e, hook_path);
		devs.push_back(std::move(d));
		device_nodes += e.nodes.size();
	}
	return doc;
}

}  // namespace

CdiSpec generate_imex_cdi(const std::vector<ImexChannel> &channels)
{
	std::vector<std::pair<std::string, Edits>> devices;
	Edits all;
	for (const auto &c : channels) {  // by id: numeric order
		Edits e;
		add_node(e, c.node);
		add_node(all, c.node);
		devices.emplace_back(std::to_string(c.id), std::move(e));
	}
	devices.emplace_back("all", std::move(all));
	CdiSpec spec;
	spec.cdi_version = lowest_cdi_version(Edits{}, devices);
	spec.doc = spec_document(spec.cdi_version, IMEX_CDI_KIND, devices, std::nullopt, spec.device_nodes);
	spec.yaml = spec_marker_line() + emit_block_yaml(spec.doc);
	spec.devices = devices.size();
	return spec;
}

CdiSpec generate_cdi(const CdiInputs &in)
{
	const Manifest &m = *in.manifest;
	const std::string libdir = "/lib/" + m.multiarch;  // container path of the driver's lib dir
	CdiSpec spec;

	Edits common;
	common.env = {"NVIDIA_CTK_LIBCUDA_DIR=" + libdir, "NVIDIA_VISIBLE_DEVICES=void"};
	for (const auto &n : in.devices->control)
		add_node(common, n);
	// One read-only bind mount per driver file, at its standard place in the container.
	std::set<std::string> files;
	for (const auto &e : m.entries)
		if (e.type == ManifestEntry::Type::File) {
			common.mounts.push_back(Mount{fs::join(in.driver_root, e.path), "/" + e.path});
			files.insert(e.path);
		}
	if (in.hook_path)
		add_hooks(common, m, *in.hook_path, in.hook_commands, libdir, files);
	// Without create-symlinks nobody makes libcuda.so.1 and friends in the container.
	if (!in.hook_path || !in.hook_commands.count("create-symlinks"))
		add_link_mounts(common, m, in.driver_root, files);
	// Without update-ldcache only images whose loader searches /lib/<multiarch>/ find the libraries.
	if (!in.hook_path || !in.hook_commands.count("update-ldcache"))
		add_lib64_mounts(common, m, in.driver_root, files);
	std::sort(common.mounts.begin(), common.mounts.end(), [](const Mount &a, const Mount &b) {
		return std::pair(depth(a.container), a.container) < std::pair(depth(b.container), b.container);
	});
	const auto devices = device_edits(*in.devices);

	spec.cdi_version = lowest_cdi_version(common, devices);

	spec.doc = spec_document(spec.cdi_version, CDI_KIND, devices, in.hook_path, spec.device_nodes);
	spec.doc["containerEdits"] = edits_json(common, in.hook_path);
	spec.yaml = spec_marker_line() + emit_block_yaml(spec.doc);
	spec.devices = devices.size();
	spec.mounts = common.mounts.size();
	spec.device_nodes += common.nodes.size();
	spec.hooks = in.hook_path ? common.hooks.size() : 0;
	return spec;
}

}  // namespace unbounded
