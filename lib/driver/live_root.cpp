#include "live_root.hpp"

#include "fs.hpp"

#include <sys/stat.h>

namespace unbounded {
namespace {

std::vector<Problem> one(const RootLocation &root, const std::string &msg) { return {Problem{root.display, msg}}; }

// lstat() of the root's path: a real directory, as verify requires it.
std::vector<Problem> check_root_path(const RootLocation &root, bool *exists)
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
	r.problems = check_root_path(root, &r.exists);
	if (!r.problems.empty())
		return r;  // nothing there, a symlink or not a directory: no root to read
	auto dir = fs::open_dir(root.real);
	if (!dir) {
		r.problems = one(root, dir.error().message);
		return r;
	}
	r.fd = std::move(*dir);
	// Only what setup wrote counts: a root or manifest that someone else could have written is
	// not believed by verify, whatever it says.
	if (auto t = fs::check_trusted(r.fd.get(), "driver root " + root.display, /*directory=*/true); !t && r.problems.empty())
		r.problems = one(root, t.error().message);
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
	if (auto p = check_root_path(root, nullptr); !p.empty())
		return p;
	auto rfd = fs::open_dir(root.real);
	if (!rfd)
		return one(root, rfd.error().message);
	if (auto t = fs::check_trusted(rfd->get(), "driver root " + root.display, /*directory=*/true); !t)
		return one(root, t.error().message);
	return check_driver_tree(rfd->get(), plan, root.display);
}

}  // namespace unbounded
