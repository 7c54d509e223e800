// One discovery run (discover_driver()): its steps over shared state, defined in the files named at
// each group. Internal to driver discovery's sources.
#pragma once

#include "driver_discovery.hpp"
#include "driver_file_names.hpp"
#include "elf.hpp"
#include "graphics_config.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

using namespace driver_files;

struct Entry {
	std::size_t tree;
	std::string rel;  // path inside the tree of the directory entry (maybe a symlink)
	std::string name;
	bool vdpau;
	std::string display;
	std::size_t scan_index = 0;  // of its directory in the tree's scan_dirs(): earlier is preferred
};

class Discovery {
public:
	explicit Discovery(const DiscoveryInput &in) : in_(in), st_(*in.staging) {}

	Result<DriverSet> run();  // discovery.cpp, as are the steps below

private:
	struct Listing {
		std::size_t tree;
		std::string dir;
		std::size_t scan_index;
		std::vector<std::string> names;
	};
	struct OtherDriver {
		std::size_t tree;
		std::string dir;      // "" for the whole tree
		std::string version;  // of its libcuda
	};

	// Steps 1 to 3
	std::string display_of(std::size_t tree, const std::string &dir, const std::string &name) const;
	std::string where() const;
	std::string cap_message(std::size_t tree, std::size_t kept, const std::vector<std::string> &ignored) const;
	Result<void> list_scan_dirs();
	Result<void> choose_version();
	void find_other_drivers();
	std::string other_driver_of(std::size_t tree, const std::string &rel, const std::vector<std::string> &via = {}) const;
	Result<void> select_entries();

	// From an entry to a file of the root
	void add(DriverFile f);
	Result<ResolvedFile> resolve_regular(const Entry &e) const;
	Result<elf::Info> elf_info(const ResolvedFile &src) const;
	std::optional<ResolvedFile> resolve_optional(std::size_t tree, const std::string &rel, std::string_view what);
	const DriverFile *taken_elsewhere(const Entry &e) const;
	bool is_link(std::size_t tree, const std::string &dir, const char *name) const;
	bool in_libdir(std::string_view name) const;

	// Steps 4, 5, 7 and 8
	Result<void> add_libraries();
	Result<void> add_unversioned_libraries();
	Result<void> add_optional_library(const Entry &e, bool broken_elf_fatal);
	Result<void> add_helpers();
	Result<void> check_native();
	Result<void> check_closure();

	// Steps 5b, 5c and 5e
	std::vector<std::string> wine_dirs(std::size_t tree) const;
	Result<void> add_wine_dlls();
	void add_wine_dlls_in(std::size_t tree, const std::string &dir);
	Result<void> add_graphics_configs();
	bool take_graphics_config(std::size_t tree, const graphics_config::Kind &kind, const std::string &dir, const std::string &dest);
	Result<void> add_optix_data();

	// Steps 6 and 6b
	Result<void> add_firmware();
	Result<void> check_firmware();

	const DiscoveryInput &in_;
	const Staging &st_;
	DriverSet out_;
	std::vector<std::string> capped_;                    // flavour caps that bit (cap_message)
	std::vector<OtherDriver> other_drivers_;             // find_other_drivers()
	std::map<std::string, std::string> other_flavours_;  // flavour name -> the other driver's version
	std::vector<Listing> listings_;
	std::vector<Entry> entries_;
	std::map<std::string, DriverFile> by_dest_;
};

}  // namespace unbounded
