// What the machine's containerd will do with CDI, whether or not it runs: its version from the package
// database (else as its binary says), and, from containerd itself (`containerd --config FILE config
// dump`, its own loader: imports, globs, version migration, refusal by exit status), whether CDI is
// on and which directories it reads specs from. Facts: shared/reference/containerd-cri-and-dra.md.
#pragma once

#include "cdi_model.hpp"
#include "context.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct ContainerdVersion {
	int major = 0, minor = 0, patch = 0;
	std::string text;  // "1.7.24"
};

// "1.7.24~ds1-6+b2", "1:1.7.27-1" (Docker's containerd.io) -> 1.7.24; nullopt when it is not one.
std::optional<ContainerdVersion> parse_containerd_version(std::string_view package_version);

// The CDI library Debian built the package against, from its paragraph's Built-Using or
// Static-Built-Using field: the entry of Debian's source package of the library (under either of its
// two names), "golang-tags.cncf-container-device-interface (= 0.8.0-5)" -> {that name, "0.8.0-5"};
// nullopt when the field names neither, or a version that is not a Debian version (at most 64 of
// its characters).
struct CdiLibrary {
	std::string package, version;
};
std::optional<CdiLibrary> cdi_library_in(std::string_view built_using);

struct ContainerdView {
	bool found = false;                        // a containerd package (or binary) is installed
	std::string runtime = "containerd";        // or "cri-o", when CRI-O is installed and containerd is not
	std::optional<ContainerdVersion> version;  // from the package; nullopt when unknown
	std::string version_source;                // "/var/lib/dpkg/status (containerd 1.7.24~ds1-6)"
	std::string binary;                        // what is asked, as the machine sees it
	std::string config;                        // the main configuration file, as the machine sees it
	std::vector<std::string> config_files;     // the files containerd read, sorted
	std::optional<bool> cdi_enabled;           // effective; nullopt when it cannot be told
	std::string cdi_enabled_from;              // "containerd config dump", or "default of containerd X"
	std::string cdi_section;                   // the table that holds enable_cdi for this version
	std::vector<std::string> cdi_spec_dirs;    // effective, in priority order (later wins)
	std::string cdi_spec_dirs_from;
	std::string max_cdi_version;        // "" when unknown (or no CDI)
	std::string max_cdi_version_from;   // the Built-Using entry that decides it, or upstream's go.mod
	std::string cdi_library;            // that entry's version ("0.8.0-5"), "" when go.mod's table decides
	std::string refused;                // why containerd refuses its configuration (it does not start)
	std::string refused_file;           // the file to fix
	std::string cri_disabled;           // the CRI plugin disabled_plugins turns off, "" when none
	std::string cri_fails;              // why the CRI plugin does not load with its table, "" when it does
	bool config_ambiguous = false;      // containerd reads its configuration in no fixed way
	std::string ambiguous_why;          // ... other than a CRI table named twice
	bool cdi_table_disabled = false;    // it is the plugin that reads enable_cdi
	std::vector<std::string> warnings;  // an unreadable configuration, an unknown version
};

// `ask`: run containerd to learn its configuration (verify and refresh); false on the boot path,
// where containerd's configuration is what it reads next, not what setup waits on: the version's
// defaults stand, and nothing is said about the files.
ContainerdView read_containerd(const Context &ctx, bool ask = true);

// "/var/run/cdi" and "/run/cdi" are one directory (/var/run is a link to /run); trailing slashes go.
std::string normalize_run_path(std::string_view path);

}  // namespace unbounded
