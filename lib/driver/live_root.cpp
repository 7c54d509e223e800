#include "live_root.hpp"

#include "fs.hpp"

#include <sys/stat.h>

namespace unbounded {
namespace {

std::vector<Problem> one(const RootLocation &root, const std::string &msg) { return {Problem{root.display, msg}}; }

// The root: lstat() of its path (a real directory, as verify requires it), the directory opened into
// `fd` and its trust checked; the first problem. Only what setup wrote counts: a root or manifest that
// someone else could have written is not believed by verify, whatever it says.
std::vector<Problem> open_root(const RootLocation &root, bool *exists, UniqueFd &fd)
{
	struct stat st = {};
	if (::lstat(root.real.c_str(), &st) < 0)
		return one(root, "Driver root " + root.display + " is missing: " + errno_string(errno));
	if (exists)
		*exists = true;
	if (S_ISLNK(st.st_mode))
		return one(root, "Driver root " + root.display + " is a symlink, not a directory");
	if (!S_ISDIR(st.st_mode))
		return one(root, "Driver root " + root.display + " is not a directory");
	auto dir = fs::open_dir(root.real);
	if (!dir)
		return one(root, dir.error().message);
	fd = std::move(*dir);
	if (auto t = fs::check_trusted(fd.get(), "driver root " + root.display, /*directory=*/true); !t)
		return one(root, t.error().message);
	return {};
}

// The manifest of an open root, read whatever its trust (the install reuses files of an untrusted
// one after checking each); the first reason verify would refuse it goes to `problems`.
void read_manifest(LiveRootRead &r)
{
	const std::string mdisplay = r.where.display + "/" + MANIFEST_NAME;
	auto mfd = fs::open_regular_at(r.fd.get(), MANIFEST_NAME, mdisplay);
	if (!mfd) {
		if (r.problems.empty())
			r.problems.push_back(Problem{mdisplay, "Driver root has no manifest (" + mfd.error().message +
								       "), it was not built by unbounded-nvidia-setup"});
		return;
	}
	if (auto t = fs::check_trusted(mfd->get(), mdisplay, /*directory=*/false); !t && r.problems.empty())
		r.problems.push_back(Problem{mdisplay, t.error().message});
	auto text = fs::read_fd(mfd->get(), mdisplay, MAX_MANIFEST_BYTES);
	if (!text) {
		if (r.problems.empty())
			r.problems.push_back(Problem{mdisplay, text.error().message});
		return;
	}
	r.manifest_text = std::move(*text);
}

}  // namespace

LiveRootRead read_live_root(const RootLocation &root)
{
	LiveRootRead r;
	r.where = root;
	r.problems = open_root(root, &r.exists, r.fd);
	if (r.fd)
		read_manifest(r);
	return r;
}

const Manifest *LiveRootRead::manifest() const
{
	if (!manifest_text)
		return nullptr;
	if (!parsed_)
		parsed_ = Manifest::from_json(*manifest_text, where.display + "/" + MANIFEST_NAME);
	return *parsed_ ? &**parsed_ : nullptr;
}

std::vector<Problem> LiveRootRead::check() const
{
	if (!problems.empty())
		return problems;
	const Manifest *m = manifest();
	if (!m)
		return {Problem{where.display + "/" + MANIFEST_NAME, parsed_->error().message}};
	return check_driver_tree(fd.get(), *m, where.display);
}

std::vector<Problem> check_built_root(const RootLocation &root, const Manifest &plan)
{
	UniqueFd fd;
	if (auto p = open_root(root, nullptr, fd); !p.empty())
		return p;
	return check_driver_tree(fd.get(), plan, root.display);
}

}  // namespace unbounded
