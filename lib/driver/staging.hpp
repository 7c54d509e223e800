// The host's read-only staging mounts (/run/host-nvidia/<N>/) and path resolution confined to them.
//
// Hosts stage their lib dirs with absolute symlink chains (libcuda.so.1 -> /usr/lib/.../nvidia/current/
// libcuda.so.1 -> libcuda.so.<v>). Those targets name host paths, so the resolver walks every component
// itself with O_NOFOLLOW, maps an absolute target onto the staging mount that holds that host path
// (exactly, from the bind mount's source root in mountinfo; otherwise by the longest suffix of the
// target that exists in a staging tree), and never opens anything outside the staging trees.
#pragma once

#include "error.hpp"
#include "unique_fd.hpp"

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

namespace unbounded {

class MountTable;

// The multiarch directories Debian's NVIDIA packages install into (nvidia-alternative's TRIPLETS).
inline constexpr const char *DEBIAN_TRIPLETS[] = {"i386-linux-gnu", "x86_64-linux-gnu", "aarch64-linux-gnu", "powerpc64le-linux-gnu"};

// What to bind so that a symlink to `target` (a host path outside every staging mount) is not
// needed: the directory that holds it, or for Debian's alternatives the directory they point into.
std::string bind_hint(std::string_view target);

// A directory of a staging tree as the refresh's settle walk saw it (staging_quiet.hpp): open, with
// its stat, or looked for and missing (fd -1; `error` the errno when it was there and did not open:
// not an answer the walk's readers take, they open it themselves and fail as they would have). The
// fd belongs to the walk's StagingWatch.
struct WalkedDir {
	int fd = -1;
	int error = 0;
	struct stat st = {};
};

// One staging tree as the settle walk saw it: the directories it looked for, by path below the tree
// ("" is the tree itself), and the flavours it found under nvidia/ (staging_layout::flavours_in).
struct WalkedTree {
	std::string name;
	std::map<std::string, WalkedDir, std::less<>> dirs;
	std::vector<std::string> flavours;
	std::vector<std::string> ignored_flavours;
};

struct StagingTree {
	std::string display;                 // path as the machine sees it: "/run/host-nvidia/0"
	UniqueFd fd;                         // O_PATH|O_DIRECTORY of the tree's root
	std::string host_prefix;             // host path of the bind mount's source ("/usr/lib/x86_64-linux-gnu"), or ""
	const WalkedTree *walked = nullptr;  // from_walk(): what the settle walk saw, read instead of again
};

struct ResolvedFile {
	std::size_t tree = 0;          // tree the final file lives in
	std::string rel;               // canonical path relative to that tree
	std::string display;           // "/run/host-nvidia/0/nvidia/current/libcuda.so.535.1"
	UniqueFd dir;                  // O_PATH fd of the containing directory
	std::string name;              // last component
	struct stat st = {};           // lstat of the final (non-symlink) file
	std::vector<std::string> via;  // the absolute symlink targets followed, in order (host paths)
};

// The most staging trees a run holds open (one O_PATH fd each, for the whole discovery). A host binds
// a handful; a thousand would exhaust the usual 1,024-fd soft limit halfway through, so more is
// refused up front, naming the count.
inline constexpr std::size_t MAX_STAGING_TREES = 256;

class Staging {
public:
	// Opens every directory entry under `real_parent` (the staging path with --root applied);
	// `display_parent` is the same path as shown to operators. Names sort numerically. More than
	// MAX_STAGING_TREES directories fail.
	static Result<Staging> open(const std::string &real_parent, const std::string &display_parent,
				    const MountTable *mounts);
	// The trees the refresh's settle walk opened (in Staging::open's order), read through the walk's
	// directories: discovery opens nothing the walk already has, and a directory it found missing is
	// not looked for again (a change since shows in the walk's next stamp). `walk` must outlive it.
	static Result<Staging> from_walk(const std::vector<WalkedTree> &walk, const std::string &real_parent,
					 const std::string &display_parent, const MountTable *mounts);
	// For tests: trees made from explicit directories.
	static Result<Staging> from_dirs(const std::vector<std::pair<std::string, std::string>> &real_and_display);

	const std::vector<StagingTree> &trees() const { return trees_; }
	std::vector<StagingTree> &trees() { return trees_; }

	// Resolves tree/rel following symlinks inside the staging trees (at most 40 hops).
	Result<ResolvedFile> resolve(std::size_t tree, std::string_view rel) const;
	// Opens a resolved regular file for reading and checks it is still the inode that was resolved.
	Result<UniqueFd> open_regular(const ResolvedFile &f) const;
	// Opens a directory inside a tree without following symlinks; a missing one gives an invalid fd.
	Result<UniqueFd> open_dir(std::size_t tree, std::string_view rel_dir) const;
	// What the settle walk saw of rel_dir in a tree (from_walk() only), or nullptr.
	const WalkedDir *walked_dir(std::size_t tree, std::string_view rel_dir) const;
	// The flavour directories of a tree (staging_layout::flavours), from the walk when there was one.
	std::vector<std::string> flavours(std::size_t tree, std::vector<std::string> *ignored) const;
	// Lists a directory inside a tree without following symlinks; missing directories give {}.
	Result<std::vector<std::string>> list(std::size_t tree, std::string_view rel_dir, bool sorted = true) const;

private:
	void add_tree(std::string display, int fd, const WalkedTree *walked, const MountTable *mounts, const std::string &canonical);
	bool exists_plain(std::size_t tree, const std::vector<std::string> &comps) const;
	Result<std::pair<std::size_t, std::string>> map_absolute(std::size_t from_tree, const std::string &target,
								 const std::string &link_display, const std::string &start_display,
								 const std::set<std::pair<std::size_t, std::string>> &visited) const;
	std::vector<StagingTree> trees_;
};

}  // namespace unbounded
