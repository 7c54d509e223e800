// Which names in a staging directory can be a driver file, before the version is known.
#include "driver_discovery.hpp"
#include "driver_file_names.hpp"

#include "graphics_config.hpp"

namespace unbounded {

using namespace driver_files;

bool could_be_driver_file(std::string_view name)
{
	for (const char *b : HELPER_BINARIES)
		if (name == b)
			return true;
	// A staging tree that is the bound egl_vendor.d (icd.d, vendors, ...) lists them in its root.
	for (const auto &kind : graphics_config::KINDS)
		if (name == kind.name)
			return true;
	for (const char *p : COMPANION_PREFIXES)
		if (name.starts_with(p) && is_library_version(name.substr(std::string_view(p).size())))
			return true;
	if (is_unversioned_library(name))
		return true;
	auto so = name.find(".so.");
	return name.starts_with("lib") && so != std::string_view::npos && is_driver_version(name.substr(so + 4));
}

}  // namespace unbounded
