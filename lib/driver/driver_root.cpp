// The live driver root: opened as the reuse source of a new tree, what of it may be reused, and
// whether a directory without a manifest may be replaced at all.
#include "driver_root.hpp"

#include "driver_root_steps.hpp"
#include "fs.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {

namespace {

// Whether a directory at the driver root's path that has no manifest may be replaced: an empty one,
// or the previous implementation's layout (directories of symlinks into the staging mounts, and
// relative links between its own entries). Anything else is someone's data: a configured
// `driver_root: /var/lib` must never make setup swap out and delete kubelet's state.
Result<void> check_replaceable(int dirfd, const RootLocation &root)
{
	const std::string staging_prefix = root.staging + "/";
	std::size_t seen = 0;
	std::string offender;
	auto walk = [&](auto &&self, int fd, const std::string &rel) -> bool {
		auto names = fs::list_dir(fd, fs::join(root.display, rel), /*sorted=*/true);
		if (!names) {
			offender = fs::join(root.display, rel);
			return false;
		}
		for (const auto &n : *names) {
			const std::string child = fs::join(rel, n);
			if (++seen > 100000) {
				offender = fs::join(root.display, child);
				return false;
			}
			struct stat st = {};
			if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) {
				offender = fs::join(root.display, child);
				return false;
			}
			if (S_ISLNK(st.st_mode)) {
				const std::string target = fs::read_link_at(fd, n).value_or(std::string());
				const bool into_staging = target.starts_with(staging_prefix) && target.find("/../") == std::string::npos;
				const bool sibling = !target.empty() && target.front() != '/' && target.find("..") == std::string::npos;
				if (!into_staging && !sibling) {
					offender = fs::join(root.display, child);
					return false;
				}
				continue;
			}
			if (!S_ISDIR(st.st_mode)) {
				offender = fs::join(root.display, child);
				return false;
			}
			UniqueFd sub(::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
			if (!sub || !self(self, sub.get(), child)) {
				if (offender.empty())
					offender = fs::join(root.display, child);
				return false;
			}
		}
		return true;
	};
	if (walk(walk, dirfd, ""))
		return {};
	return fail(make_error("Refusing to replace " + root.display + " (driver_root): it is a directory that " +
			       "unbounded-nvidia-setup did not build (no " + MANIFEST_NAME + ", and " + offender +
			       " is not part of a driver root); point driver_root at a directory of its own"));
}

}  // namespace

using root_build::mtime_ns;

bool live_file_reusable(int live_fd, const ManifestEntry *o, const ManifestEntry &e)
{
	struct stat ost = {};
	return o && o->type == ManifestEntry::Type::File && o->source_id == e.source_id && o->size == e.size &&
	       o->mtime_ns == e.mtime_ns && o->mode == e.mode &&
	       ::fstatat(live_fd, e.path.c_str(), &ost, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ost.st_mode) &&
	       static_cast<std::uint64_t>(ost.st_size) == e.size && mtime_ns(ost) == e.mtime_ns && (ost.st_mode & 07777) == e.mode;
}

namespace root_build {

Result<LiveRoot> open_live_root(int parent_fd, const std::string &base, const RootLocation &root,
				const std::optional<std::string> *known_manifest)
{
	if (struct stat lst = {}; ::fstatat(parent_fd, base.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(lst.st_mode) &&
				  !S_ISLNK(lst.st_mode))
		return fail(make_error("Refusing to replace " + root.display + " (driver_root): it is " +
				       fs::file_type_name(lst.st_mode) + ", not a driver root"));
	LiveRoot live;
	live.fd.reset(::openat(parent_fd, base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
	if (!live.fd)
		return live;
	auto text = !known_manifest   ? fs::read_file_at(live.fd.get(), MANIFEST_NAME, root.display + "/" + MANIFEST_NAME, MAX_MANIFEST_BYTES)
		    : *known_manifest ? Result<std::string>(**known_manifest)
				      : fail(Error{});
	if (text)
		live.manifest_text = std::move(*text);
	else if (auto r = check_replaceable(live.fd.get(), root); !r)
		return fail(r.error());
	return live;
}

// A live file may be hard-linked into the new tree instead of copied (live_file_reusable).
bool reuse_live_file(const LiveRoot &live, const Manifest *live_manifest, const ManifestEntry &e, int dirfd, const std::string &name)
{
	return live_manifest && live.fd && live_file_reusable(live.fd.get(), live_manifest->find(e.path), e) &&
	       ::linkat(live.fd.get(), e.path.c_str(), dirfd, name.c_str(), 0) == 0;
}

}  // namespace root_build

}  // namespace unbounded
