// What containerd's own answer (`containerd config dump`, lib/consumer/containerd.cpp) leaves out:
// 2.x's dump passes over an import that is not there, and stops merging at it, where its daemon
// returns that error and does not start; and a version-1 file that names the CRI plugin twice
// ([plugins.cri] and its URI), which 2.x renames in Go's map order, so that either table stands from
// start to start; and a merged version below 2, which the dump prints as 3: the daemon panics on one
// below 0 (MigrateConfigTo indexes its migrations by it) and migrates a 1 as the dump does not. All are seen by walking the files' `imports` as containerd 2.x resolves them: a
// relative import joined to the importing file's directory, a path holding '*' expanded by Go's
// filepath.Glob in every component, breadth first. Facts: containerd 2.1.9 as Debian ships it
// (cmd/containerd/server/config); held to its daemon's behaviour by tests/oracle/.
#pragma once

#include "error.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace unbounded {

// The CRI plugin's URI: 1.x's one CRI plugin, which reads enable_cdi, and a version-1 file's
// [plugins.cri] as 2.x renames it (v1MigratePluginName).
inline constexpr const char *CRI_1 = "io.containerd.grpc.v1.cri";

struct ContainerdImports {
	std::vector<std::string> files;  // read, in containerd's order
	std::string missing;             // an import that is not there: the daemon does not start
	std::string ambiguous;           // the file that names the CRI plugin twice
	std::string unknown;             // why a file could not be followed (verify's limits)
	long long version = 3;           // the merged version (LoadConfig's), 2.x's own to start with
	std::string version_file;        // the file that set it
};

ContainerdImports walk_containerd_imports(int root_fd, const std::string &main_file);

// A runtime's configuration file inside the machine root (a symlink resolved there), opened without
// blocking, read only when regular and at most `cap` bytes: containerd's and CRI-O's.
Result<std::string> read_runtime_config(int root_fd, const std::string &path, std::size_t cap);

}  // namespace unbounded
