#include "staging.hpp"

#include "chase.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "mounts.hpp"
#include "nvidia_machine.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <set>
#include <unistd.h>

namespace unbounded {

static std::string join_comps(const std::vector<std::string> &comps)
{
	std::string s;
	for (const auto &c : comps) {
		if (!s.empty())
			s += '/';
		s += c;
	}
	return s;
}

Result<Staging> Staging::open(const std::string &real_parent, const std::string &display_parent,
			      const MountTable *mounts)
{
	Staging s;
	auto pfd = fs::open_dir(real_parent);
	if (!pfd) {
		if (pfd.error().errnum == ENOENT)
			return s;
		return fail(pfd.error());
	}
	auto names = fs::list_dir(pfd->get(), display_parent);
	if (!names)
		return fail(names.error());
	std::sort(names->begin(), names->end(), numeric_name_less);
	const std::string canonical_parent = mounts ? MountTable::canonical(real_parent) : real_parent;
	for (const auto &n : *names) {
		if (!is_staging_entry(n))
			continue;
		int fd = ::openat(pfd->get(), n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;  // not a directory (or a symlink): not a staging tree
		if (s.trees_.size() == MAX_STAGING_TREES) {
			::close(fd);
			const auto dirs = std::count_if(names->begin(), names->end(), [&](const std::string &x) {
				struct stat st = {};
				return is_staging_entry(x) && ::fstatat(pfd->get(), x.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
			});
			return fail(make_error(display_parent + " holds " + std::to_string(dirs) + " staging directories, more than the " +
						       std::to_string(MAX_STAGING_TREES) + " a run reads (a host binds a handful)",
					       EXIT_NOT_READY, E2BIG));
		}
		s.add_tree(fs::join(display_parent, n), fd, nullptr, mounts, fs::join(canonical_parent, n));
	}
	return s;
}

// A tree that owns `fd`, with what `mounts` (when given) says of the mount at its `canonical` path.
void Staging::add_tree(std::string display, int fd, const WalkedTree *walked, const MountTable *mounts, const std::string &canonical)
{
	StagingTree t;
	t.display = std::move(display);
	t.fd.reset(fd);
	t.walked = walked;
	if (auto m = mounts ? mounts->mount_at(canonical) : std::nullopt; m && m->root != "/")
		t.host_prefix = m->root;
	trees_.push_back(std::move(t));
}

Result<Staging> Staging::from_walk(const std::vector<WalkedTree> &walk, const std::string &real_parent,
				   const std::string &display_parent, const MountTable *mounts)
{
	Staging s;
	const std::string canonical_parent = mounts ? MountTable::canonical(real_parent) : real_parent;
	for (const auto &w : walk) {
		auto root = w.dirs.find("");
		if (root == w.dirs.end() || root->second.fd < 0)
			continue;
		// A tree of its own: the walk's fd is the walk's.
		int fd = ::fcntl(root->second.fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return fail(last_errno_error("Failed to duplicate the fd of " + fs::join(display_parent, w.name)));
		s.add_tree(fs::join(display_parent, w.name), fd, &w, mounts, fs::join(canonical_parent, w.name));
	}
	return s;
}

const WalkedDir *Staging::walked_dir(std::size_t tree, std::string_view rel_dir) const
{
	const WalkedTree *w = trees_.at(tree).walked;
	if (!w)
		return nullptr;
	auto it = w->dirs.find(rel_dir);
	return it == w->dirs.end() || it->second.error != 0 ? nullptr : &it->second;
}

std::vector<std::string> Staging::flavours(std::size_t tree, std::vector<std::string> *ignored) const
{
	if (const WalkedTree *w = trees_.at(tree).walked) {
		if (ignored)
			*ignored = w->ignored_flavours;
		return w->flavours;
	}
	return staging_layout::flavours(trees_.at(tree).fd.get(), ignored);
}

Result<Staging> Staging::from_dirs(const std::vector<std::pair<std::string, std::string>> &real_and_display)
{
	Staging s;
	for (const auto &[real, display] : real_and_display) {
		int fd = ::open(real.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(last_errno_error("Failed to open staging directory " + display));
		s.add_tree(display, fd, nullptr, nullptr, "");
	}
	return s;
}

// True when tree/comps exists without crossing any symlink (used to probe suffix candidates, so the
// probe itself can never be led outside the tree). The last component may be a symlink itself.
bool Staging::exists_plain(std::size_t tree, const std::vector<std::string> &comps) const
{
	if (comps.empty() || std::find(comps.begin(), comps.end(), "..") != comps.end())
		return false;
	return chase(trees_[tree].fd.get(), join_comps(comps), ChaseHow{Chase::Beneath | Chase::NoSymlinks | Chase::NoFollow, nullptr, {}})
		.has_value();
}

std::string bind_hint(std::string_view target)
{
	// nvidia-alternative's postinst (Debian) names its links /etc/alternatives/nvidia--NAME, with
	// "-<multiarch>" after a library's NAME, and points them into nvidia/current/ (or the flavour's
	// directory, nvidia/tesla-535/ ...): binding that directory makes the entry unnecessary.
	constexpr std::string_view alternatives = "/etc/alternatives/nvidia--";
	if (target.starts_with(alternatives)) {
		std::string_view name = target.substr(alternatives.size());
		for (const char *triplet : DEBIAN_TRIPLETS) {
			const std::string suffix = std::string("-") + triplet;
			if (name.ends_with(suffix))
				return "bind the host's /usr/lib/" + std::string(triplet) +
				       " (Debian keeps the real file in its nvidia/current/ or nvidia/<flavour>/), or /etc/alternatives with it";
		}
		return "bind the host's /usr/lib/nvidia/current (or /usr/lib/nvidia/<flavour> such as tesla-535), where Debian keeps " +
		       std::string(name);
	}
	const std::string dir = fs::dirname(std::string(target));
	return "bind the host's " + (dir.empty() || dir == "." ? std::string("/") : dir);
}

Result<std::pair<std::size_t, std::string>> Staging::map_absolute(std::size_t from_tree, const std::string &target,
								  const std::string &link_display, const std::string &start_display,
								  const std::set<std::pair<std::size_t, std::string>> &visited) const
{
	// Exact mapping through the bind mounts' host source paths, the current tree first.
	std::vector<std::size_t> order{from_tree};
	for (std::size_t i = 0; i < trees_.size(); i++)
		if (i != from_tree)
			order.push_back(i);
	for (std::size_t t : order) {
		const std::string &p = trees_[t].host_prefix;
		if (p.empty())
			continue;
		if (target == p)
			return std::pair{t, std::string()};
		if (target.size() > p.size() && target.compare(0, p.size(), p) == 0 && target[p.size()] == '/')
			return std::pair{t, target.substr(p.size() + 1)};
	}
	// Longest suffix that exists in a tree: /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1 is
	// nvidia/current/libcuda.so.1 in a tree staged from /usr/lib/x86_64-linux-gnu.
	const auto comps = fs::split_path(target);
	bool looped = false;
	for (std::size_t drop = 1; drop < comps.size(); drop++) {
		std::vector<std::string> suffix(comps.begin() + static_cast<long>(drop), comps.end());
		const std::string rel = join_comps(suffix);
		for (std::size_t t : order) {
			// A candidate that is a link this walk already passed would only loop (a link to
			// /x/y/libcuda.so.1 named libcuda.so.1, or /usr/bin/nvidia-smi -> /etc/alternatives/...
			// -> /usr/lib/nvidia/current/nvidia-smi finding /usr/bin's nvidia-smi again): the file
			// is elsewhere, or not staged.
			if (visited.count({t, rel})) {
				looped = true;
				continue;
			}
			if (exists_plain(t, suffix))
				return std::pair{t, rel};
		}
	}
	// Which of the two it is cannot be told from the staging trees alone (a host path is only
	// guessed from its suffix): say both, and what to bind.
	if (looped)
		return fail(make_error("Failed to resolve " + start_display + " (" + link_display + " is a symlink to " + target +
					       ", which leads back to a link already followed: a symlink loop, or its directory is not bound: " +
					       bind_hint(target) + ")",
				       EXIT_NOT_READY, ELOOP));
	return fail(errno_error(ENOENT, "Failed to resolve " + link_display + " (symlink to " + target +
						", outside the staging mounts: " + bind_hint(target) + ")"));
}

namespace {

// The messages resolve() has always given, from where the one resolver stopped.
Error resolve_error(const ChaseError &e, const std::string &start_display, const std::string &tree_display)
{
	const std::string here = fs::join(tree_display, e.at);
	switch (e.step) {
	case ChaseStep::Hook: return e.error;
	case ChaseStep::ReadLink: return errno_error(e.errnum, "Failed to read symlink " + here);
	case ChaseStep::Walk:
		if (e.symlinks > 0)
			return errno_error(e.errnum, "Failed to resolve " + start_display + " (dangling symlink, " + here + " is missing)");
		return errno_error(e.errnum, "Failed to resolve " + start_display);
	default: return errno_error(e.errnum, "Failed to resolve " + start_display);
	}
}

}  // namespace

Result<ResolvedFile> Staging::resolve(std::size_t tree, std::string_view rel) const
{
	const std::string start_display = fs::join(trees_.at(tree).display, rel);
	std::vector<std::string> via;
	std::set<std::pair<std::size_t, std::string>> visited;  // the links passed, (tree, path in it)
	ChaseHow how;                                           // InRoot: ".." stops at the tree root, like RESOLVE_IN_ROOT
	// An absolute target names a host path: it continues in the tree that holds it.
	how.on_symlink = [&](const std::string &link, const std::string &target) -> Result<std::optional<ChaseJump>> {
		visited.emplace(tree, link);
		if (!target.starts_with('/'))
			return std::nullopt;
		via.push_back(target);
		auto mapped = map_absolute(tree, target, fs::join(trees_[tree].display, link), start_display, visited);
		if (!mapped)
			return fail(mapped.error());
		tree = mapped->first;
		return ChaseJump{trees_[tree].fd.get(), std::move(mapped->second)};
	};
	auto c = chase(trees_[tree].fd.get(), rel, how);
	if (!c)
		return fail(resolve_error(c.error(), start_display, trees_[tree].display));
	if (c->name.empty())
		return fail(errno_error(EISDIR, "Failed to resolve " + start_display));
	ResolvedFile f;
	f.tree = tree;
	f.rel = std::move(c->rel);
	f.display = fs::join(trees_[tree].display, f.rel);
	f.dir = std::move(c->dir);
	f.name = std::move(c->name);
	f.st = c->st;
	f.via = std::move(via);
	return f;
}

Result<UniqueFd> Staging::open_regular(const ResolvedFile &f) const
{
	int fd = ::openat(f.dir.get(), f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail(last_errno_error("Failed to open " + f.display));
	UniqueFd u(fd);
	struct stat st = {};
	if (::fstat(u.get(), &st) < 0)
		return fail(last_errno_error("Failed to stat " + f.display));
	if (!S_ISREG(st.st_mode))
		return fail(errno_error(EINVAL, "Refusing " + f.display + ", not a regular file"));
	if (st.st_dev != f.st.st_dev || st.st_ino != f.st.st_ino)
		return fail(errno_error(ESTALE, "Failed to open " + f.display + ", it changed while being read"));
	return u;
}

Result<UniqueFd> Staging::open_dir(std::size_t tree, std::string_view rel_dir) const
{
	const auto comps = fs::split_path(rel_dir);
	// From the deepest directory the settle walk looked for on the way, if any.
	int start = trees_.at(tree).fd.get();
	std::size_t done = 0;
	if (trees_[tree].walked) {
		std::string prefix;
		for (std::size_t i = 0; i <= comps.size(); i++) {
			if (i > 0)
				prefix += (i > 1 ? "/" : "") + comps[i - 1];
			const WalkedDir *w = walked_dir(tree, prefix);
			if (!w)
				break;
			if (w->fd < 0)
				return UniqueFd();  // missing when the walk looked
			start = w->fd;
			done = i;
		}
	}
	UniqueFd d(::openat(start, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!d)
		return fail(last_errno_error("Failed to open " + (done == 0 ? trees_[tree].display : fs::join(trees_[tree].display, rel_dir))));
	for (std::size_t i = done; i < comps.size(); i++) {
		const std::string &c = comps[i];
		int fd = ::openat(d.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
				return UniqueFd();
			return fail(last_errno_error("Failed to open " + fs::join(trees_[tree].display, rel_dir)));
		}
		d.reset(fd);
	}
	return d;
}

Result<std::vector<std::string>> Staging::list(std::size_t tree, std::string_view rel_dir, bool sorted) const
{
	auto d = open_dir(tree, rel_dir);
	if (!d)
		return fail(d.error());
	if (!*d)
		return std::vector<std::string>{};
	return fs::list_dir(d->get(), fs::join(trees_[tree].display, rel_dir), sorted);
}

}  // namespace unbounded
