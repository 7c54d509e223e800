#include "dev_char.hpp"

#include "fs.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace unbounded {
namespace {

constexpr const char *DEV_CHAR = "/dev/char";

// "../nvidia0" for /dev/nvidia0: relative, as udev makes them, so the link means the same inside
// the machine and under a test root.
std::string link_target(const std::string &node_path) { return "../" + node_path.substr(5); }

// A link that setup (or nvidia-ctk, or udev) made for an NVIDIA node: relative, into one of the
// names our nodes have. Only these are ever replaced.
bool ours_in_form(std::string_view target)
{
	if (!target.starts_with("../"))
		return false;
	target.remove_prefix(3);
	return target.find("..") == std::string_view::npos &&
	       (target.starts_with("nvidia") || target.starts_with("dri/") || target == "gdrdrv");
}

// Whether `name` in /dev/char leads to a character device numbered `dev`.
bool leads_to(int dirfd, const std::string &name, dev_t dev)
{
	struct stat st = {};
	return ::fstatat(dirfd, name.c_str(), &st, 0) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == dev;
}

std::string read_link(int dirfd, const std::string &name)
{
	return fs::read_link_at(dirfd, name).value_or(std::string());
}

// "195:0" -> 195:0; nullopt for any other name (dot-files, udev's own names).
std::optional<dev_t> number_of(std::string_view name)
{
	const auto colon = name.find(':');
	if (colon == std::string_view::npos)
		return std::nullopt;
	const auto major = numbered_name(name.substr(0, colon), "", 7), minor = numbered_name(name.substr(colon + 1), "", 7);
	if (!major || !minor)
		return std::nullopt;
	return ::makedev(*major, *minor);
}

// The links of ours whose node went: named for a number none of `nodes` has, ours in form, and no
// longer leading to a character device of that number. Everything else is left as it is.
void remove_stale(int dirfd, const std::vector<DeviceNode> &nodes, DevCharLinks &r)
{
	auto names = fs::list_dir(dirfd, DEV_CHAR);
	if (!names) {
		r.warnings.push_back(names.error().message + "; links of nodes that went are kept");
		return;
	}
	std::set<dev_t> current;
	for (const auto &n : nodes)
		current.insert(::makedev(n.major, n.minor));
	for (const auto &name : *names) {
		const auto dev = number_of(name);
		if (!dev || current.count(*dev))
			continue;
		struct stat st = {};
		if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode) ||
		    !ours_in_form(read_link(dirfd, name)) || leads_to(dirfd, name, *dev))
			continue;
		if (::unlinkat(dirfd, name.c_str(), 0) == 0)
			r.removed++;
		else if (errno != ENOENT)
			r.warnings.push_back("Failed to remove " + std::string(DEV_CHAR) + "/" + name + ", whose node went: " + std::strerror(errno));
	}
}

}  // namespace

std::vector<DeviceNode> spec_device_nodes(const DeviceInventory &inv)
{
	std::vector<DeviceNode> out;
	std::set<std::pair<unsigned, unsigned>> seen;
	auto add = [&](const DeviceNode &n) {
		if (seen.insert({n.major, n.minor}).second)
			out.push_back(n);
	};
	for (const auto &n : inv.control)
		add(n);
	for (const auto &g : inv.gpus) {
		for (const auto &n : g.nodes)
			add(n);
		for (const auto &m : g.migs) {
			add(m.gi_access);
			add(m.ci_access);
		}
	}
	for (const auto &c : inv.imex_channels)
		add(c.node);
	for (const auto &f : inv.fabric)
		for (const auto &n : f.nodes)
			add(n);
	return out;
}

DevCharLinks ensure_dev_char_links(const Context &ctx, const std::vector<DeviceNode> &nodes)
{
	DevCharLinks r;
	if (nodes.empty())
		return r;
	const std::string real = ctx.real(DEV_CHAR);
	if (::mkdir(real.c_str(), 0755) < 0 && errno != EEXIST) {
		r.warnings.push_back(std::string("Failed to create ") + DEV_CHAR + ": " + std::strerror(errno) +
				     "; containers run with the systemd cgroup driver lose their GPUs at the next daemon-reload");
		return r;
	}
	auto dir = fs::open_dir(real);
	if (!dir) {
		r.warnings.push_back(dir.error().message + "; no /dev/char links made");
		return r;
	}
	for (const auto &n : nodes) {
		const std::string name = std::to_string(n.major) + ":" + std::to_string(n.minor);
		const std::string display = std::string(DEV_CHAR) + "/" + name;
		const std::string target = link_target(n.path);
		const dev_t dev = ::makedev(n.major, n.minor);
		// The common case first, one call: the link is there and leads to the node.
		if (leads_to(dir->get(), name, dev)) {
			r.present++;
			continue;
		}
		struct stat st = {};
		const bool exists = ::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (exists) {
			const std::string current = S_ISLNK(st.st_mode) ? read_link(dir->get(), name) : std::string();
			if (!S_ISLNK(st.st_mode) || !ours_in_form(current)) {
				r.warnings.push_back("Leaving " + display + " alone: it was not made for an NVIDIA node and does not lead to " +
						     n.path + ", so runc's systemd cgroup driver cannot allow " + n.path + " by it");
				continue;
			}
		}
		if (!exists) {
			// Made in place: one that appeared meanwhile (EEXIST) is someone else's.
			if (::symlinkat(target.c_str(), dir->get(), name.c_str()) == 0)
				r.created++;
			else if (errno != EEXIST)
				r.warnings.push_back("Failed to link " + display + " to " + target + ": " + std::strerror(errno));
			continue;
		}
		// Ours, leading elsewhere: a new link under a temporary name, renamed over it, so a reader
		// sees the old link or the new one.
		const std::string tmp = "." + name + ".unbounded-" + fs::random_suffix();
		if (::symlinkat(target.c_str(), dir->get(), tmp.c_str()) < 0 ||
		    ::renameat(dir->get(), tmp.c_str(), dir->get(), name.c_str()) < 0) {
			r.warnings.push_back("Failed to link " + display + " to " + target + ": " + std::strerror(errno));
			::unlinkat(dir->get(), tmp.c_str(), 0);
			continue;
		}
		r.created++;
	}
	remove_stale(dir->get(), nodes, r);
	return r;
}

}  // namespace unbounded
