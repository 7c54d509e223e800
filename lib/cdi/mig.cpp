#include "mig.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <charconv>
#include <fcntl.h>
#include <set>
#include <unordered_set>

namespace unbounded {
namespace {

std::optional<unsigned> to_unsigned(std::string_view s)
{
	unsigned v = 0;
	if (!all_digits(s) || s.size() > 9 || std::from_chars(s.data(), s.data() + s.size(), v).ec != std::errc())
		return std::nullopt;
	return v;
}

// "gi12" -> 12; nullopt for anything else ("config", "gi", "gi1x").
std::optional<unsigned> numbered(std::string_view name, std::string_view prefix)
{
	if (!name.starts_with(prefix))
		return std::nullopt;
	return to_unsigned(name.substr(prefix.size()));
}

// A name mig-minors may hold: config, monitor, gpu<G>/gi<I>/access, gpu<G>/gi<I>/ci<C>/access. One
// pass over the name: the file has a thousand lines on 8 GPUs, read on every boot.
bool valid_capability(std::string_view name)
{
	if (name == "config" || name == "monitor")
		return true;
	auto literal = [&](std::string_view lit) {
		if (!name.starts_with(lit))
			return false;
		name.remove_prefix(lit.size());
		return true;
	};
	auto number = [&] {
		std::size_t n = 0;
		while (n < name.size() && name[n] >= '0' && name[n] <= '9')
			n++;
		name.remove_prefix(n);
		return n > 0 && n <= 6;
	};
	if (!literal("gpu") || !number() || !literal("/gi") || !number())
		return false;
	if (literal("/ci") && !number())
		return false;
	return literal("/access") && name.empty();
}

// The numbered subdirectories `prefix<N>` of dirfd/name, in numeric order, and the open directory
// (to go on from); none if absent.
Result<std::vector<unsigned>> numbered_dirs(int dirfd, const std::string &name, const std::string &display, std::string_view prefix,
					    UniqueFd *opened = nullptr)
{
	std::vector<unsigned> out;
	auto fd = fs::open_dir_at(dirfd, name, display);
	if (!fd) {
		if (fd.error().errnum == ENOENT || fd.error().errnum == ENOTDIR)
			return out;
		return fail(fd.error());
	}
	auto names = fs::list_dir_once(fd->get(), display);
	if (!names)
		return fail(names.error());
	for (const auto &n : *names)
		if (auto v = numbered(n, prefix))
			out.push_back(*v);
	std::sort(out.begin(), out.end());
	if (opened)
		*opened = std::move(*fd);
	return out;
}

}  // namespace

std::map<std::string, unsigned> parse_proc_devices(std::string_view text)
{
	std::map<std::string, unsigned> majors;
	bool character = false;
	while (!text.empty()) {
		const auto nl = text.find('\n');
		const std::string_view line = trim_blanks(text.substr(0, nl));
		text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
		if (line == "Character devices:") {
			character = true;
			continue;
		}
		if (line == "Block devices:") {
			character = false;
			continue;
		}
		auto space = line.find_first_of(" \t");
		if (!character || space == std::string_view::npos)
			continue;
		auto major = to_unsigned(line.substr(0, space));
		auto name = trim_blanks(line.substr(space));
		if (major && !name.empty())
			majors.emplace(std::string(name), *major);
	}
	return majors;
}

std::map<std::string, unsigned> parse_mig_minors(std::string_view text, const std::string &display,
						 std::vector<std::string> *skipped, const std::set<std::string, std::less<>> *wanted)
{
	std::map<std::string, unsigned> minors;
	std::unordered_set<std::string_view> want;  // hashed: a thousand lookups on 8 GPUs
	if (wanted)
		want.insert(wanted->begin(), wanted->end());
	std::size_t number = 0;
	while (!text.empty()) {  // a thousand lines on 8 GPUs: no copies on the way
		const auto nl = text.find('\n');
		const std::string_view line = text.substr(0, nl);
		text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
		number++;
		if (line.empty())
			continue;
		const auto space = line.find(' ');
		const std::string_view name = line.substr(0, space);
		std::optional<unsigned> minor;
		const char *why = nullptr;
		if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
			why = "not 'NAME MINOR'";
		else if (!valid_capability(name))
			why = "unknown capability";
		else if (!(minor = to_unsigned(line.substr(space + 1))))
			why = "minor is not a number";
		if (!why) {
			if (!wanted || want.count(name))
				minors.emplace(std::string(name), *minor);
		} else if (skipped) {
			std::string what = why;
			if (what == "unknown capability")
				what += " '" + printable(name) + "'";
			else if (what == "minor is not a number")
				what = "minor '" + printable(line.substr(space + 1)) + "' is not a number";
			skipped->push_back(display + ":" + std::to_string(number) + ": " + what);
		}
	}
	return minors;
}

const Result<std::map<std::string, unsigned>> &CharMajors::get()
{
	if (!majors_) {
		auto text = fs::read_file(ctx_.real(PROC_DEVICES), 64 * 1024);
		majors_ = text ? Result<std::map<std::string, unsigned>>(parse_proc_devices(*text))
			       : Result<std::map<std::string, unsigned>>(fail(text.error()));
	}
	return *majors_;
}

std::string gi_capability(unsigned gpu_minor, unsigned gi)
{
	return "gpu" + std::to_string(gpu_minor) + "/gi" + std::to_string(gi) + "/access";
}

std::string ci_capability(unsigned gpu_minor, unsigned gi, unsigned ci)
{
	return "gpu" + std::to_string(gpu_minor) + "/gi" + std::to_string(gi) + "/ci" + std::to_string(ci) + "/access";
}

Result<MigTree> read_mig_tree(const Context &ctx, unsigned gpu_minor)
{
	MigTree tree;
	const std::string mig = std::string(PROC_CAPABILITIES) + "/gpu" + std::to_string(gpu_minor) + "/mig";
	UniqueFd mig_fd;
	auto gis = numbered_dirs(AT_FDCWD, ctx.real(mig), mig, "gi", &mig_fd);
	if (!gis)
		return fail(gis.error());
	tree.gpu_instances = *gis;
	for (unsigned gi : *gis) {
		const std::string name = "gi" + std::to_string(gi);
		auto cis = numbered_dirs(mig_fd.get(), name, mig + "/" + name, "ci");
		if (!cis)
			return fail(cis.error());
		for (unsigned ci : *cis)
			tree.compute_instances.emplace_back(gi, ci);
	}
	return tree;
}

namespace {

// What every instance's node is checked against, read once and only when some GPU has instances.
struct CapsSource {
	std::map<std::string, unsigned> minors;
	unsigned major = 0;
};

Result<CapsSource> read_caps_source(const Context &ctx, CharMajors &char_majors, const std::set<std::string, std::less<>> &wanted,
				    std::vector<std::string> &warnings)
{
	CapsSource s;
	const auto &majors = char_majors.get();
	if (!majors)
		return fail(make_error("MIG instances exist but " + std::string(PROC_DEVICES) + " is unreadable: " + majors.error().message,
				       EXIT_NOT_READY, majors.error().errnum));
	auto it = majors->find("nvidia-caps");
	if (it == majors->end())
		return fail(make_error("MIG instances exist but " + std::string(PROC_DEVICES) + " names no 'nvidia-caps' major",
				       EXIT_NOT_READY, ENODEV));
	s.major = it->second;
	auto text = fs::read_file(ctx.real(PROC_MIG_MINORS), 4u << 20);
	if (!text)
		return fail(make_error("MIG instances exist but " + std::string(PROC_MIG_MINORS) + " is unreadable: " + text.error().message,
				       EXIT_NOT_READY, text.error().errnum));
	std::vector<std::string> skipped;
	s.minors = parse_mig_minors(*text, PROC_MIG_MINORS, &skipped, &wanted);
	if (!skipped.empty())
		warnings.push_back("Skipped " + std::to_string(skipped.size()) + " line(s) of " + PROC_MIG_MINORS + ", first: " +
				   skipped.front());
	return s;
}

// The access node of one capability: its minor from mig-minors, as nvidia-ctk takes it, and a
// character device of the nvidia-caps major and that minor at /dev/nvidia-caps/nvidia-cap<minor>.
// (The capability's own access file names the minor too; reading it for each of 112 instances of
// 8x7 MIG would double the cost of the enumeration for a check the node itself already makes.)
Result<DeviceNode> access_node(const Context &ctx, const CapsSource &caps, const std::string &capability, unsigned gpu_index)
{
	const std::string what = "MIG capability " + capability + " (GPU " + std::to_string(gpu_index) + ")";
	auto it = caps.minors.find(capability);
	if (it == caps.minors.end())
		return fail(make_error(what + " exists but " + PROC_MIG_MINORS + " does not list it", EXIT_NOT_READY, ENOENT));
	const unsigned minor = it->second;
	const std::string path = std::string(NVIDIA_CAPS_DEV_DIR) + "/nvidia-cap" + std::to_string(minor);
	auto node = read_device_node(ctx, path);
	if (!node)
		return fail(make_error(what + " has no character device " + path + ": bind /dev/nvidia-caps into the machine",
				       EXIT_NOT_READY, ENOENT));
	if (node->major != caps.major || node->minor != minor)
		return fail(make_error(what + ": " + path + " is " + std::to_string(node->major) + ":" + std::to_string(node->minor) +
					       ", expected nvidia-caps " + std::to_string(caps.major) + ":" + std::to_string(minor),
				       EXIT_NOT_READY, EINVAL));
	return *node;
}

}  // namespace

Result<void> add_mig_devices(const Context &ctx, CharMajors &majors, DeviceInventory &inv)
{
	// The trees first: mig-minors lists every possible instance (over a thousand lines on 8 GPUs),
	// and only the minors of those that exist are kept.
	std::vector<MigTree> trees;
	std::set<std::string, std::less<>> wanted;
	for (std::size_t i = 0; i < inv.gpus.size(); i++) {
		Gpu &g = inv.gpus[i];
		auto tree = read_mig_tree(ctx, g.minor);
		if (!tree)
			return fail(tree.error());
		g.mig_enabled = !tree->gpu_instances.empty();
		if (g.mig_enabled && tree->compute_instances.empty())
			inv.warnings.push_back("GPU " + std::to_string(i) + " has MIG enabled but no compute instance: it offers no CDI device");
		for (auto [gi, ci] : tree->compute_instances) {
			wanted.insert(gi_capability(g.minor, gi));
			wanted.insert(ci_capability(g.minor, gi, ci));
		}
		trees.push_back(std::move(*tree));
	}
	// No device at all: a spec of "all" without a node is one the CDI library refuses whole.
	if (std::all_of(inv.gpus.begin(), inv.gpus.end(), [](const Gpu &g) { return g.mig_enabled; }) && wanted.empty())
		return fail(make_error("No GPU offers a CDI device: each of the " + std::to_string(inv.gpus.size()) +
					       " GPU(s) has MIG enabled but no compute instance (nvidia-smi mig -cgi ... -C makes them)",
				       EXIT_NOT_READY, ENODEV));
	if (wanted.empty())
		return {};
	auto caps = read_caps_source(ctx, majors, wanted, inv.warnings);
	if (!caps)
		return fail(caps.error());
	for (std::size_t i = 0; i < inv.gpus.size(); i++) {
		Gpu &g = inv.gpus[i];
		std::map<unsigned, DeviceNode> gi_nodes;  // a GI's node serves each of its CIs
		for (auto [gi, ci] : trees[i].compute_instances) {
			auto known = gi_nodes.find(gi);
			if (known == gi_nodes.end()) {
				auto gi_node = access_node(ctx, *caps, gi_capability(g.minor, gi), static_cast<unsigned>(i));
				if (!gi_node)
					return fail(gi_node.error());
				known = gi_nodes.emplace(gi, *gi_node).first;
			}
			auto ci_node = access_node(ctx, *caps, ci_capability(g.minor, gi, ci), static_cast<unsigned>(i));
			if (!ci_node)
				return fail(ci_node.error());
			g.migs.push_back(MigDevice{known->second, *ci_node});
		}
	}
	return {};
}

}  // namespace unbounded
