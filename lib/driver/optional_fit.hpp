// Optional files never fail a boot: nvoptix.bin (134 MB in Debian's 535) and the
// DLSS DLLs (FileKind::Data) are read by no CUDA pod, and on a small /run their copies made setup fail
// with ENOSPC, so containerd started for no pod at all. Before the spec is generated, the plan loses
// the optional files whose copies would not leave room on the driver root's file system; the manifest
// and the spec are then made from the reduced plan, so the root, its manifest and the spec agree, and
// an unchanged re-run (whose reduced plan is the same) stays unchanged. Space the old root frees only
// at its swap counts from the next run on (a refresh, within refresh.interval). Required files are
// never left out: a root without libcuda fails as before, loudly.
#pragma once

#include "driver_discovery.hpp"
#include "driver_root.hpp"
#include "manifest.hpp"
#include "unique_fd.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// What a new tree may use beside the live one.
struct FreeSpace {
	std::uint64_t available = 0;  // f_bavail * f_bsize
	std::uint64_t total = 0;      // the file system's size
	std::uint64_t block = 4096;   // f_bsize: a file takes whole blocks
	std::string where;            // the directory asked, as operators see it ("/run/nvidia")
};

// Room kept free after the copies: a twentieth of the file system, at least 4 MiB and at most 256 MiB,
// so the machine's other writers to /run (journald's runtime journal, sockets, pid files) are not
// starved at boot, and a large disk does not keep gigabytes idle.
std::uint64_t space_reserve(std::uint64_t total);

// statfs() of the driver root's parent, or of its nearest existing ancestor before the first run;
// nullopt when none answers or it reports no size (a tmpfs mounted with size=0 has no limit).
std::optional<FreeSpace> free_space_for(const RootLocation &root);

struct LeftOut {
	std::string path;     // the entry's path in the root: "usr/share/nvidia/nvoptix.bin"
	std::string warning;  // one sentence for the journal and the report
};

// Whether a planned file can be hard-linked from the live root (costs no space).
using Reusable = std::function<bool(const ManifestEntry &)>;

// Removes from `plan` the optional entries whose copies do not fit `space` with space_reserve() kept
// free, and says which. Optional entries are admitted in the plan's order. Pure: the file system is
// asked only through `reusable`.
std::vector<LeftOut> leave_out_what_does_not_fit(Manifest &plan, const DriverSet &driver, const Reusable &reusable,
						 const FreeSpace &space, const std::string &root_display);

// Removes every optional entry that would be copied (not linked), after a copy found the file system
// fuller than the estimate said.
std::vector<LeftOut> leave_out_all_copied(Manifest &plan, const DriverSet &driver, const Reusable &reusable,
					  const std::string &root_display, const std::string &why);

// Bytes the new tree's copies would take if nothing were reused (the fast path's test: when these fit,
// the live root need not be read at all).
std::uint64_t bytes_without_reuse(const Manifest &plan, std::uint64_t block);

// What can be hard-linked from the live root open at `live_fd` (-1: none) with `live_manifest` (null:
// none, and every copy counts in full): a file whose entry there has the same source, size, mtime and
// mode, and which still has them.
Reusable reusable_in(int live_fd, const Manifest *live_manifest);

}  // namespace unbounded
