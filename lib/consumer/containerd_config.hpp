// containerd's configuration as containerd itself loads it (its server/config LoadConfig), from the
// files of the machine root: the main file, then its imports breadth first (a relative import joined to
// the importing file's directory, a path holding '*' expanded by Go's filepath.Glob in every
// component), each read with toml++. 1.x merges the files' top-level keys (the last non-zero
// `version` wins), replaces a plugin's whole table by a later file's, and refuses a version above 2
// or, at version 2, a plugin key that is not a URI. 2.x starts at version 3, renames a version-1
// file's plugins, merges plugin tables key by key, refuses a version above 3, and when the merged
// version is below 3 copies the version-2 CRI keys into io.containerd.cri.v1.runtime where that
// table does not set them. Facts: containerd 1.7.24 and 2.1.9 as Debian ships them; held to their
// `containerd config dump` by tests/oracle/.
#pragma once

#include "error.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

struct LoadedConfig {
	std::vector<std::string> files;  // read, in containerd's order
	std::string refused;             // why containerd refuses the configuration and does not start
	std::string refused_file;        // the file to fix
	bool unknown = false;            // a file verify could not read (its bounds, its permissions)
	bool ambiguous = false;          // containerd itself reads it one way or another (2.x's renaming)
	std::vector<std::string> warnings;
	long version = 0;                // merged (0: none set)
	std::optional<bool> enable_cdi;  // as the files set it; nullopt: the version's default
	std::string enable_cdi_from;     // the file that set it
	std::optional<std::vector<std::string>> cdi_spec_dirs;
	std::string cdi_spec_dirs_from;
	std::string cri_table;            // the CRI table that holds them ("io.containerd.grpc.v1.cri")
	std::string cri_table_from;       // 1.x: the file whose CRI table stands
	std::string cri_disabled;         // a CRI plugin disabled_plugins names (kubelet gets no runtime), "" if none
	bool cdi_table_disabled = false;  // that plugin is the one that reads enable_cdi
};

// `major`: containerd's major version (1 or 2; 2 for anything newer).
LoadedConfig load_containerd_config(int root_fd, const std::string &main_file, int major);

// A runtime's configuration file inside the machine root (a symlink resolved there), opened without
// blocking, read only when regular and at most `cap` bytes: containerd's and CRI-O's.
Result<std::string> read_runtime_config(int root_fd, const std::string &path, std::size_t cap);

// Go's path/filepath.Clean, lexically.
std::string go_clean_path(const std::string &path);

}  // namespace unbounded
