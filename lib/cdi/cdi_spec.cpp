#include "cdi_spec.hpp"

#include "cdi_model.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "spec_marker.hpp"

#include <algorithm>
#include <set>

namespace unbounded {
namespace cdi_parts {

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

}  // namespace cdi_parts

// The spec's parts, kept for the checks of the spec just generated.
struct CdiParts {
	std::string version;
	const char *kind = CDI_KIND;
	std::vector<std::pair<std::string, cdi_parts::Edits>> devices;
	std::optional<cdi_parts::Edits> common;  // top-level containerEdits, when the spec has them
	std::optional<std::string> hook_path;
};

namespace {

using cdi_parts::Edits;
using cdi_parts::Mount;

void add_node(Edits &e, const DeviceNode &n)
{
	e.nodes.push_back(n);
	if (n.gid != 0 && (n.mode & 0006) != 0006)
		e.additional_gids.insert(n.gid);
}

std::size_t depth(const std::string &p) { return static_cast<std::size_t>(std::count(p.begin(), p.end(), '/')); }

std::vector<std::string> create_symlinks(const std::string &hook, const std::vector<std::string> &links)
{
	std::vector<std::string> argv{fs::basename(hook), "create-symlinks"};
	for (const auto &l : links) {
		argv.push_back("--link");
		argv.push_back(l);
	}
	return argv;
}

// create-symlinks: every symlink of the driver root (SONAME links, libcuda.so, ...) plus GLVND's
// indirect GLX entry point.
std::vector<std::string> create_symlinks_hook(const Manifest &m, const std::string &hook, const std::string &libdir,
					      const std::set<std::string> &files)
{
	std::vector<std::pair<std::string, std::string>> links;
	for (const auto &e : m.entries)
		if (e.type == ManifestEntry::Type::Link)
			links.emplace_back(e.target, "/" + e.path);
	const std::string glx = "lib/" + m.multiarch + "/libGLX_nvidia.so." + m.driver_version;
	if (files.count(glx))
		links.emplace_back(fs::basename(glx), libdir + "/libGLX_indirect.so.0");
	std::sort(links.begin(), links.end(), [](const auto &a, const auto &b) { return a.second < b.second; });
	std::vector<std::string> args;
	for (const auto &[target, link] : links)
		args.push_back(target + "::" + link);
	return create_symlinks(hook, args);
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
// /dev/dri/by-path/pci-<bdf>-card -> ../cardN and -render -> ../renderDN for a GPU's DRM nodes, as
// udev names them and nvidia-ctk's create-symlinks hook makes them in the container. Made from the
// nodes /sys listed for the GPU (add_drm_nodes()), not read from /dev/dri/by-path: a machine's /dev
// has no udev to have made them.
std::vector<std::string> drm_by_path_links(const Gpu &g)
{
	std::vector<std::string> links;
	if (g.pci.empty())
		return links;
	for (const auto &n : g.nodes) {
		const std::string name = fs::basename(n.path);
		if (!n.path.starts_with("/dev/dri/"))
			continue;
		const char *suffix = name.starts_with("card")      ? "-card"
				     : name.starts_with("renderD") ? "-render"
								   : nullptr;
		if (suffix)
			links.push_back("../" + name + "::/dev/dri/by-path/pci-" + g.pci + suffix);
	}
	return links;
}

// `by_path_hook`: the hook, when it has create-symlinks (the by-path links need it).
std::vector<std::pair<std::string, Edits>> device_edits(const DeviceInventory &inv, const std::optional<std::string> &by_path_hook)
{
	std::vector<std::pair<std::string, Edits>> devices;
	Edits all;
	std::set<std::string> in_all;
	std::vector<std::string> all_links;
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
		if (by_path_hook) {
			const auto links = drm_by_path_links(g);
			if (!links.empty())
				e.hooks.push_back(create_symlinks(*by_path_hook, links));
			all_links.insert(all_links.end(), links.begin(), links.end());
		}
		devices.emplace_back(std::to_string(i), e);
		if (g.uuid)
			devices.emplace_back(*g.uuid, e);
	}
	std::sort(devices.begin(), devices.end(), [](const auto &a, const auto &b) { return numeric_name_less(a.first, b.first); });
	if (!all_links.empty())
		all.hooks.push_back(create_symlinks(*by_path_hook, all_links));
	devices.emplace_back("all", all);
	return devices;
}

// The spec's YAML written straight from the edits, byte for byte what yaml-cpp's Emitter writes for
// the document they describe (a unit test holds the two equal): on 8 GPUs x 7 MIG the document has
// 292 device nodes, and building it to print it cost as much as generating the spec.
class SpecWriter {
public:
	explicit SpecWriter(std::string &out) : out_(out) {}

	void scalar_line(std::size_t indent, const char *key, const std::string &value)
	{
		out_.append(indent, ' ');
		out_ += key;
		out_ += ": ";
		append_yaml_string(out_, value);
		out_ += '\n';
	}
	void number_line(std::size_t indent, const char *key, unsigned long long value)
	{
		out_.append(indent, ' ');
		out_ += key;
		out_ += ": ";
		out_ += std::to_string(value);
		out_ += '\n';
	}
	void key(std::size_t indent, const char *key)
	{
		out_.append(indent, ' ');
		out_ += key;
		out_ += ":\n";
	}
	void item(std::size_t indent, const std::string &value)
	{
		out_.append(indent, ' ');
		out_ += "- ";
		append_yaml_string(out_, value);
		out_ += '\n';
	}
	// "- key: value" opening a mapping in a sequence; the mapping's other keys follow at indent + 2.
	void item_map(std::size_t indent, const char *key, const std::string &value)
	{
		out_.append(indent, ' ');
		out_ += "- ";
		scalar_line(0, key, value);
	}

	// The non-empty parts of one set of edits, at `indent`; nothing to write (the "all" device when
	// every GPU is MIG-enabled without a compute instance) is the empty mapping yaml-cpp writes.
	void edits(const Edits &e, const std::optional<std::string> &hook_path, std::size_t indent)
	{
		const std::size_t start = out_.size();
		if (!e.env.empty()) {
			key(indent, "env");
			for (const auto &v : e.env)
				item(indent + 2, v);
		}
		if (!e.nodes.empty()) {
			key(indent, "deviceNodes");
			for (const auto &n : e.nodes) {
				item_map(indent + 2, "path", n.path);
				if (n.major)  // omitempty, as in the CDI Go types
					number_line(indent + 4, "major", n.major);
				if (n.minor)
					number_line(indent + 4, "minor", n.minor);
				number_line(indent + 4, "fileMode", n.mode);
				scalar_line(indent + 4, "permissions", "rwm");
				if (n.gid)
					number_line(indent + 4, "gid", n.gid);
			}
		}
		if (!e.hooks.empty() && hook_path) {
			key(indent, "hooks");
			for (const auto &argv : e.hooks) {
				item_map(indent + 2, "hookName", "createContainer");
				scalar_line(indent + 4, "path", *hook_path);
				key(indent + 4, "args");
				for (const auto &a : argv)
					item(indent + 6, a);
				key(indent + 4, "env");
				item(indent + 6, "NVIDIA_CTK_DEBUG=false");
			}
		}
		if (!e.mounts.empty()) {
			key(indent, "mounts");
			for (const auto &m : e.mounts) {
				item_map(indent + 2, "hostPath", m.host);
				scalar_line(indent + 4, "containerPath", m.container);
				key(indent + 4, "options");
				for (const auto &o : CDI_MOUNT_OPTIONS)
					item(indent + 6, o);
			}
		}
		if (!e.additional_gids.empty()) {
			key(indent, "additionalGids");
			for (unsigned g : e.additional_gids) {
				out_.append(indent + 2, ' ');
				out_ += "- " + std::to_string(g) + "\n";
			}
		}
		if (out_.size() == start) {
			out_.append(indent, ' ');
			out_ += "{}\n";
		}
	}

private:
	std::string &out_;
};

// The whole spec: marker, then the document. `common` null: no top-level containerEdits.
std::string spec_yaml(const CdiParts &p)
{
	const auto &[version, kind, devices, common_edits, hook_path] = p;
	const Edits *common = common_edits ? &*common_edits : nullptr;
	std::string out = spec_marker_line();
	out.reserve(out.size() + 256 * (devices.size() + 16));
	out += "---\n";
	SpecWriter w(out);
	w.scalar_line(0, "cdiVersion", version);
	w.scalar_line(0, "kind", kind);
	w.key(0, "devices");
	for (const auto &[name, e] : devices) {
		w.item_map(2, "name", name);
		w.key(4, "containerEdits");
		w.edits(e, hook_path, 6);
	}
	if (common) {
		w.key(0, "containerEdits");
		w.edits(*common, hook_path, 2);
	}
	return out;
}

// The lowest cdiVersion the content needs (cdi_model.hpp). Nodes are written without hostPath, which
// would need 0.5.0, since theirs is their path.
std::string lowest_cdi_version(const CdiParts &p)
{
	bool gids = p.common && !p.common->additional_gids.empty(), digit_names = false;
	for (const auto &[name, e] : p.devices) {
		gids |= !e.additional_gids.empty();
		digit_names |= !name.empty() && name.front() >= '0' && name.front() <= '9';
	}
	CdiVersionNeed needs;
	if (gids)
		needs.add(CdiFeature::AdditionalGids);
	if (digit_names)
		needs.add(CdiFeature::DigitFirstName);
	return std::string(needs.version());
}

// The version, counts, the paths verify checks, then the bytes.
CdiSpec finish(std::shared_ptr<CdiParts> parts)
{
	parts->version = lowest_cdi_version(*parts);
	CdiSpec spec;
	spec.cdi_version = parts->version;
	spec.devices = parts->devices.size();
	for (const auto &[name, e] : parts->devices) {
		spec.device_nodes += e.nodes.size();
		for (const auto &m : e.mounts)
			spec.mount_host_paths.push_back(m.host);
	}
	if (parts->common) {
		spec.device_nodes += parts->common->nodes.size();
		spec.mounts = parts->common->mounts.size();
		for (const auto &m : parts->common->mounts)
			spec.mount_host_paths.push_back(m.host);
		if (parts->hook_path && !parts->common->hooks.empty()) {
			spec.hook_path = parts->hook_path;
			spec.hooks = parts->common->hooks.size();
		}
	}
	spec.parts = std::move(parts);
	spec.yaml = spec_yaml(*spec.parts);
	return spec;
}

}  // namespace

CdiSpec generate_imex_cdi(const std::vector<ImexChannel> &channels)
{
	auto parts = std::make_shared<CdiParts>();
	parts->kind = IMEX_CDI_KIND;
	Edits all;
	for (const auto &c : channels) {  // by id: numeric order
		Edits e;
		add_node(e, c.node);
		add_node(all, c.node);
		parts->devices.emplace_back(std::to_string(c.id), std::move(e));
	}
	parts->devices.emplace_back("all", std::move(all));
	return finish(std::move(parts));
}

CdiSpec generate_fabric_cdi(const FabricDevices &f)
{
	auto parts = std::make_shared<CdiParts>();
	parts->kind = f.kind;
	Edits all;
	for (const auto &n : f.nodes)
		add_node(all, n);
	for (const auto &m : f.mounts)
		all.mounts.push_back(Mount{m, m});
	parts->devices.emplace_back("all", std::move(all));
	parts->common.emplace().env = {"NVIDIA_VISIBLE_DEVICES=void"};  // as nvidia-ctk's: a runtime hook must not add GPUs
	return finish(std::move(parts));
}

const char *CdiSpec::kind() const
{
	return parts ? parts->kind : "";
}

CdiSpec generate_cdi(const CdiInputs &in)
{
	const Manifest &m = *in.manifest;
	const std::string libdir = "/lib/" + m.multiarch;  // container path of the driver's lib dir

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
	// The daemons' sockets and the MPS pipe directory, at the same path in the container.
	for (const auto &p : in.devices->ipc)
		common.mounts.push_back(Mount{p, p});
	if (in.hook_path)
		add_hooks(common, m, *in.hook_path, in.hook_commands, libdir, files);
	// Without create-symlinks nobody makes libcuda.so.1 and friends in the container.
	if (!in.hook_path || !in.hook_commands.count("create-symlinks"))
		add_link_mounts(common, m, in.driver_root, files);
	// Without update-ldcache only images whose loader searches /lib/<multiarch>/ find the libraries.
	if (!in.hook_path || !in.hook_commands.count("update-ldcache"))
		add_lib64_mounts(common, m, in.driver_root, files);
	// By depth, then path: each key computed once, the strings compared in place.
	std::vector<std::pair<std::size_t, std::size_t>> order;  // (depth, index)
	for (std::size_t i = 0; i < common.mounts.size(); i++)
		order.emplace_back(depth(common.mounts[i].container), i);
	std::sort(order.begin(), order.end(), [&](const auto &a, const auto &b) {
		return a.first != b.first ? a.first < b.first : common.mounts[a.second].container < common.mounts[b.second].container;
	});
	std::vector<Mount> sorted;
	sorted.reserve(order.size());
	for (const auto &o : order)
		sorted.push_back(std::move(common.mounts[o.second]));
	common.mounts = std::move(sorted);
	auto parts = std::make_shared<CdiParts>();
	const bool links = in.hook_path && in.hook_commands.count("create-symlinks");
	parts->devices = device_edits(*in.devices, links ? in.hook_path : std::nullopt);
	parts->hook_path = in.hook_path;
	parts->common = std::move(common);
	return finish(std::move(parts));
}

}  // namespace unbounded
