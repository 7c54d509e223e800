#include "staged_driver.hpp"

#include "discovery_cache.hpp"
#include "staging.hpp"

namespace unbounded {

StagedDriver discover_staged(const Context &ctx, const StagingState &state, int run_dir,
			     const std::optional<std::string> &kernel_version, bool keep_memo, const std::vector<WalkedTree> *walked)
{
	StagedDriver out;
	const std::string &staging_path = ctx.config.staging;
	auto staging = walked && !walked->empty()
			       ? Staging::from_walk(*walked, ctx.real(staging_path), staging_path, state.mounts_table.get())
			       : Staging::open(ctx.real(staging_path), staging_path, state.mounts_table.get());
	if (!staging) {
		out.error = staging.error();
		return out;
	}
	const std::string cache_display = std::string("/run/unbounded-nvidia/") + DiscoveryCache::FILE_NAME;
	DiscoveryCache cache;
	if (run_dir >= 0) {
		std::string rejected;
		cache = DiscoveryCache::load(run_dir, cache_display, &rejected);
		if (!rejected.empty())
			out.warnings.push_back(rejected + ", reading the staging mounts afresh");
	}
	DiscoveryInput in{&*staging, kernel_version, &cache, ctx.config.nvoptix};
	auto d = discover_driver(in);
	out.cache_hits = cache.hits();
	if (keep_memo && run_dir >= 0)
		out.memo = std::move(cache);
	if (!d)
		out.error = d.error();
	else
		out.driver = std::move(*d);
	return out;
}

}  // namespace unbounded
