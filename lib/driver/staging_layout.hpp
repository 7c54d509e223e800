// Where driver files live inside a staging tree, relative to its root: read by discovery, watched by
// the refresh path unit and stamped by the refresh's settle wait, so all three agree.
#pragma once

#include "format.hpp"
#include "fs.hpp"
#include "unique_fd.hpp"

#include <algorithm>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace unbounded::staging_layout {

// Debian keeps the real files of a driver in <multiarch>/nvidia/<flavour>/ (current, or a datacenter
// flavour such as tesla-535, tesla-470), with links in the lib dir itself; VDPAU lives in a vdpau/
// subdirectory. The flavours are found in the tree, not named here: FLAVOUR_PARENT's subdirectories.
inline constexpr const char *FLAVOUR_PARENT = "nvidia";
// More flavour directories than this in one tree are not looked at (Debian has a handful).
inline constexpr std::size_t MAX_FLAVOURS = 32;
// Parents of the per-version GSP firmware directories (<dir>/<version>/*.bin). "" is the tree itself:
// the host's /lib/firmware/nvidia bound as a staging mount of its own.
inline constexpr const char *FIRMWARE_DIRS[] = {"firmware/nvidia", "nvidia", "lib/firmware/nvidia", ""};
// Drivers from this major version on ship GSP firmware (gsp_*.bin) that GPUs running the GSP load.
inline constexpr int FIRST_GSP_DRIVER_MAJOR = 510;

// The flavour directories under nvidia/ of the tree at `tree_fd`: real directories only (a symlink,
// such as Debian's /usr/lib/nvidia/nvidia -> /etc/alternatives/nvidia, is not followed), "current"
// first (what Debian's alternatives select unless told otherwise), then by name, at most MAX_FLAVOURS:
// "current" is never among those the cap drops. Those it drops go to `ignored` (by name), for the
// caller to say. A tree without nvidia/ has none. flavours_in() takes nvidia/ already open.
inline std::vector<std::string> flavours_in(int flavour_parent_fd, std::vector<std::string> *ignored = nullptr)
{
	std::vector<std::string> out;
	auto names = fs::list_dir(flavour_parent_fd, FLAVOUR_PARENT);  // sorted
	if (!names)
		return out;
	std::stable_partition(names->begin(), names->end(), [](const std::string &n) { return n == "current"; });
	for (const auto &n : *names) {
		struct stat st = {};
		if (!is_plain_file_name(n) || ::fstatat(flavour_parent_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (out.size() < MAX_FLAVOURS)
			out.push_back(n);
		else if (ignored)
			ignored->push_back(n);
		else
			break;
	}
	return out;
}

inline std::vector<std::string> flavours(int tree_fd, std::vector<std::string> *ignored = nullptr)
{
	UniqueFd dir(::openat(tree_fd, FLAVOUR_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (!dir)
		return {};
	return flavours_in(dir.get(), ignored);
}

// The directories searched in a tree, in the order their files are preferred: the tree itself,
// each flavour, vdpau/ (the tree's, then each flavour's), bin/.
inline std::vector<std::string> scan_dirs(const std::vector<std::string> &flavour_names)
{
	std::vector<std::string> dirs{""};
	for (const auto &f : flavour_names)
		dirs.push_back(std::string(FLAVOUR_PARENT) + "/" + f);
	dirs.emplace_back("vdpau");
	for (const auto &f : flavour_names)
		dirs.push_back(std::string(FLAVOUR_PARENT) + "/" + f + "/vdpau");
	dirs.emplace_back("bin");
	return dirs;
}

inline std::vector<std::string> scan_dirs(int tree_fd) { return scan_dirs(flavours(tree_fd)); }

// What a watch of the tree needs beyond scan_dirs: nvidia/ itself, where a new flavour appears.
inline std::vector<std::string> watched_dirs(int tree_fd)
{
	auto dirs = scan_dirs(tree_fd);
	dirs.insert(dirs.begin() + 1, FLAVOUR_PARENT);
	return dirs;
}

}  // namespace unbounded::staging_layout
