// Building /run/nvidia/driver: a new tree beside the old one (same file system), regular-file copies
// or hard links of unchanged files, relative SONAME links, the manifest last, then an atomic swap with
// renameat2(RENAME_EXCHANGE) and removal of the old tree. Readers see the old or the new root, whole.
#pragma once

#include "driver_discovery.hpp"
#include "error.hpp"
#include "manifest.hpp"

#include "unique_fd.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace unbounded {

inline std::int64_t mtime_ns(const struct stat &st)
{
	return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

struct RootLocation {
	std::string real;     // with --root applied
	std::string display;  // as operators see it: "/run/nvidia/driver"
	// The staging parent ("/run/host-nvidia"): a directory of symlinks into it is the layout of the
	// previous implementation, which setup may replace although it has no manifest.
	std::string staging = "/run/host-nvidia";
};

// What the new root will contain, computed from the discovered driver before anything is written.
Result<Manifest> plan_manifest(const DriverSet &driver, std::vector<std::string> &warnings);

struct InstallStats {
	bool unchanged = false;  // the live root matched the plan and passed check_driver_tree: kept as it is
	std::uint64_t files = 0, links = 0;
	std::uint64_t files_copied = 0, files_reused = 0;
	std::uint64_t bytes_copied = 0, bytes_reused = 0;
	std::uint64_t stale_trees_removed = 0;
	std::uint64_t stale_trees_kept = 0;  // could not be removed (a mount inside): left aside, warned about
	std::size_t copy_threads = 0;        // the copies ran on this many threads
	std::string fstype;                  // file system of the driver root's parent ("tmpfs" expected)
	std::vector<std::string> warnings;
};

// After a swap, the tree that was live before (if any), kept until the caller has finished the steps
// that belong with the new root: commit() removes it, rollback() puts it back and removes the new
// one. Destroying it commits. A kill -9 in between leaves a temp tree the next run removes.
class PreviousRoot {
public:
	PreviousRoot(UniqueFd parent, std::string base, std::string held_name, std::string display, bool existed);
	PreviousRoot(const PreviousRoot &) = delete;
	PreviousRoot &operator=(const PreviousRoot &) = delete;
	~PreviousRoot();
	Result<void> commit();
	Result<void> rollback();

private:
	UniqueFd parent_;
	std::string base_, held_, display_;
	bool existed_, done_ = false;
};

// Builds and swaps in the new root; the old tree is handed over in `previous`. `known_manifest`: the
// live root's manifest as the caller has read it this run (nullopt: it has none), so it is not read
// twice.
Result<InstallStats> install_driver_root(const DriverSet &driver, const Manifest &plan, const RootLocation &root,
					 std::optional<PreviousRoot> &previous, const std::optional<std::string> &known_manifest);

struct Problem {
	std::string path;     // what is wrong, as operators see it
	std::string message;  // one sentence
};

// Checks an open driver root's files against a manifest: every entry as recorded, nothing else, and
// exact-version libcuda and libnvidia-ml among the files.
std::vector<Problem> check_driver_tree(int root_fd, const Manifest &m, const std::string &display);

// The temp and old trees a killed run left beside the root, removed (install's first step, which the
// space estimate for optional files takes earlier so their space counts as free). Needs the lock.
Result<InstallStats> remove_stale_temp_trees(const RootLocation &root);

}  // namespace unbounded
