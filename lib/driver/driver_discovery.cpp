// discover_driver(): the steps of one discovery, in order.
#include "discovery.hpp"

namespace unbounded {

Result<DriverSet> Discovery::run()
{
	if (st_.trees().empty())
		return fail(make_error("No staging mounts found"));
	for (auto step : {&Discovery::list_scan_dirs, &Discovery::choose_version, &Discovery::select_entries,
			  &Discovery::add_libraries, &Discovery::add_helpers, &Discovery::add_firmware,
			  &Discovery::check_firmware, &Discovery::check_native, &Discovery::add_graphics_configs, &Discovery::add_wine_dlls, &Discovery::add_optix_data, &Discovery::check_closure})
		if (auto r = (this->*step)(); !r)
			return fail(r.error());
	for (auto &[dest, f] : by_dest_)
		out_.files.push_back(std::move(f));
	return std::move(out_);
}

Result<DriverSet> discover_driver(const DiscoveryInput &in)
{
	return Discovery(in).run();
}

}  // namespace unbounded
