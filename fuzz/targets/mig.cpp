// The MIG capability files: /proc/driver/nvidia-caps/mig-minors, and the capabilities tree whose
// entries the input's lines name (read_mig_tree). Contract: skipped lines are each one printable
// line; minors kept are of known capability names; the tree's instances are numbers that its
// entries named, in order; an error is one printable line.
#define FUZZ_NAME "mig"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "mig.hpp"

#include <algorithm>
#include <filesystem>

using namespace unbounded;

FUZZ_TARGET
{
	std::vector<std::string> skipped;
	auto minors = parse_mig_minors(text, "/proc/driver/nvidia-caps/mig-minors", &skipped);
	for (const auto &s : skipped)
		FUZZ_REQUIRE_LINE(s);
	for (const auto &[name, minor] : minors)
		FUZZ_REQUIRE(name == "config" || name == "monitor" || (name.starts_with("gpu") && name.ends_with("/access")), name);

	// The same lines as entries of gpu0's tree (each line a relative path; "/" ends in a directory).
	const Context &ctx = fuzz::machine_context(FUZZ_NAME);
	const std::string mig = ctx.root + std::string(PROC_CAPABILITIES) + "/gpu0/mig";
	fuzz::reset_dir(mig);
	std::size_t made = 0;
	for (std::size_t pos = 0; pos < text.size() && made < 64;) {
		auto nl = text.find('\n', pos);
		std::string line(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
		pos = nl == std::string_view::npos ? text.size() : nl + 1;
		if (line.empty() || line.size() > 100 || line.find('\0') != std::string::npos || line.find("..") != std::string::npos ||
		    line[0] == '/')
			continue;
		std::error_code ec;
		const std::string p = mig + "/" + line;
		if (line.back() == '/')
			std::filesystem::create_directories(p, ec);
		else {
			std::filesystem::create_directories(std::filesystem::path(p).parent_path(), ec);
			if (!ec)
				(void)fuzz::try_write_file(p, "DeviceFileMinor: 1\n");
		}
		made++;
	}
	auto tree = read_mig_tree(ctx, 0);
	if (!tree) {
		FUZZ_REQUIRE_LINE(tree.error().message);
		return 0;
	}
	FUZZ_REQUIRE(std::is_sorted(tree->gpu_instances.begin(), tree->gpu_instances.end()), "GIs out of order");
	FUZZ_REQUIRE(std::is_sorted(tree->compute_instances.begin(), tree->compute_instances.end()), "CIs out of order");
	for (const auto &[gi, ci] : tree->compute_instances)
		FUZZ_REQUIRE(std::binary_search(tree->gpu_instances.begin(), tree->gpu_instances.end(), gi),
			     "CI of GI " + std::to_string(gi) + " that has no GI");
	return 0;
}
