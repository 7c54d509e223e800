// The parts install_driver_root() (driver_root_install.cpp) is built of that the other file of the
// driver root holds: the live root's reuse (driver_root.cpp); and the copy pool. Internal to the
// driver root's two sources.
#pragma once

#include "driver_root.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace unbounded::root_build {

inline std::int64_t mtime_ns(const struct stat &st)
{
	return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// dirs/rel under `base`, made where missing (0755) and opened without following symlinks; `cache`
// keeps every directory made or opened so far, by its path relative to `base`.
Result<UniqueFd> mkdirs_at(int base, const std::string &rel, std::map<std::string, UniqueFd> &cache, const std::string &display);

struct CopyJob {
	const DriverFile *src;
	const ManifestEntry *entry;
	int dirfd;  // kept open by the caller's directory cache
	std::string name, dest_display;
};

// Copies run on a small pool: a datacenter driver is a few files of hundreds of MB and many small
// ones, and one core copying tmpfs to tmpfs leaves the others idle on the boot path. Largest first,
// so the last file to finish is a small one. Each copy is what copy_source() is alone (its own fds,
// no buffers beyond copy_file_range's), so the torn-copy, ENOSPC and kill -9 guarantees hold per file;
// the first failure stops the others from starting and is the one reported.
struct CopiesDone {
	std::uint64_t bytes = 0;
	std::size_t threads = 0;
};
Result<CopiesDone> run_copies(std::vector<CopyJob> &jobs);

// Step 2: the live root, the reuse source when it is a real directory with a readable manifest.
struct LiveRoot {
	UniqueFd fd;                // invalid when there is none
	std::string manifest_text;  // "" when it has no readable manifest
};
// known_manifest: see install_driver_root.
Result<LiveRoot> open_live_root(int parent_fd, const std::string &base, const RootLocation &root,
				const std::optional<std::string> *known_manifest);
// A live file may be hard-linked into the new tree instead of copied (live_file_reusable).
bool reuse_live_file(const LiveRoot &live, const Manifest *live_manifest, const ManifestEntry &e, int dirfd, const std::string &name);

}  // namespace unbounded::root_build
