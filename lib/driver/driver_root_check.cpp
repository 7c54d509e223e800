// The checks of a driver root: every manifest entry as recorded, nothing else, the two libraries GPU
// pods need; and of a live root, that it and its manifest are ours.
#include "driver_root.hpp"

#include "driver_root_steps.hpp"
#include "fs.hpp"

#include <cerrno>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {

using root_build::mtime_ns;

namespace {

// One entry of the manifest as recorded: a file of its size, mode and mtime, a link to its target.
void check_entry(int root_fd, const ManifestEntry &e, const std::string &display, std::vector<Problem> &problems)
{
	auto add = [&](const std::string &path, const std::string &msg) { problems.push_back(Problem{path, msg}); };
	const std::string p = fs::join(display, e.path);
	struct stat est = {};
	if (::fstatat(root_fd, e.path.c_str(), &est, AT_SYMLINK_NOFOLLOW) < 0) {
		add(p, p + " is missing: " + errno_string(errno));
		return;
	}
	if (e.type == ManifestEntry::Type::File) {
		if (!S_ISREG(est.st_mode)) {
			add(p, p + (S_ISLNK(est.st_mode) ? " is a symlink, expected a regular file" : " is not a regular file"));
			return;
		}
		if (static_cast<std::uint64_t>(est.st_size) != e.size)
			add(p, p + " has " + std::to_string(est.st_size) + " bytes, expected " + std::to_string(e.size) +
				       (static_cast<std::uint64_t>(est.st_size) < e.size ? " (truncated)" : ""));
		else if ((est.st_mode & 07777) != e.mode)
			add(p, p + " has the wrong mode");
		else if (mtime_ns(est) != e.mtime_ns)
			add(p, p + " was modified after setup");
		return;
	}
	const auto target = S_ISLNK(est.st_mode) ? fs::read_link_at(root_fd, e.path).value_or(std::string()) : std::string();
	if (target.empty()) {  // a symlink's target is never empty
		add(p, p + " is not a symlink");
		return;
	}
	if (target != e.target) {
		add(p, p + " points to " + target + ", expected " + e.target);
		return;
	}
	struct stat tst = {};
	if (::fstatat(root_fd, e.path.c_str(), &tst, 0) < 0)
		add(p, p + " is a dangling symlink to " + e.target);
}

// Nothing that the manifest does not list (leftovers of another layout, a hand-made link).
void check_unlisted(int root_fd, const Manifest &m, const std::set<std::string> &expected_dirs, const std::string &display,
		    std::vector<Problem> &problems)
{
	auto add = [&](const std::string &path, const std::string &msg) { problems.push_back(Problem{path, msg}); };
	std::vector<std::string> stack{""};
	while (!stack.empty()) {
		std::string dir = stack.back();
		stack.pop_back();
		UniqueFd dfd(dir.empty() ? ::fcntl(root_fd, F_DUPFD_CLOEXEC, 3)
					 : ::openat(root_fd, dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (!dfd)
			continue;
		auto names = fs::list_dir(dfd.get(), fs::join(display, dir));
		if (!names)
			continue;
		for (const auto &n : *names) {
			const std::string rel = fs::join(dir, n);
			if (rel == MANIFEST_NAME || m.find(rel))
				continue;
			if (expected_dirs.count(rel)) {
				stack.push_back(rel);
				continue;
			}
			add(fs::join(display, rel), fs::join(display, rel) + " is not in the manifest");
		}
	}
}

}  // namespace

std::vector<Problem> check_driver_tree(int root_fd, const Manifest &m, const std::string &display)
{
	std::vector<Problem> problems;
	auto add = [&](const std::string &path, const std::string &msg) { problems.push_back(Problem{path, msg}); };
	std::set<std::string> expected_dirs;
	for (const auto &e : m.entries) {
		for (std::string d = fs::dirname(e.path); d != "." && d != "/"; d = fs::dirname(d))
			expected_dirs.insert(d);
		check_entry(root_fd, e, display, problems);
	}
	check_unlisted(root_fd, m, expected_dirs, display, problems);

	// The two libraries GPU pods cannot do without, at the exact driver version.
	const std::string libdir = "lib/" + m.multiarch + "/";
	for (const char *lib : {"libcuda.so.", "libnvidia-ml.so."}) {
		const std::string rel = libdir + lib + m.driver_version;
		const ManifestEntry *e = m.find(rel);
		if (!e || e->type != ManifestEntry::Type::File)
			add(fs::join(display, rel), fs::join(display, rel) + " is not part of the driver root");
	}
	return problems;
}

std::vector<Problem> verify_driver_root(const RootLocation &root, Manifest *manifest_out, const Manifest *expected,
					bool *is_expected)
{
	if (is_expected)
		*is_expected = false;
	auto one = [&](const std::string &msg) { return std::vector<Problem>{Problem{root.display, msg}}; };
	struct stat st = {};
	if (::lstat(root.real.c_str(), &st) < 0)
		return one("Driver root " + root.display + " is missing: " + errno_string(errno));
	if (S_ISLNK(st.st_mode))
		return one("Driver root " + root.display + " is a symlink, not a directory");
	if (!S_ISDIR(st.st_mode))
		return one("Driver root " + root.display + " is not a directory");
	auto rfd = fs::open_dir(root.real);
	if (!rfd)
		return one(rfd.error().message);
	// Only what setup wrote counts: a root or manifest that someone else could have written is
	// not believed, whatever it says.
	const std::string mdisplay = root.display + "/" + MANIFEST_NAME;
	auto read = fs::read_trusted_at(rfd->get(), "driver root " + root.display, MANIFEST_NAME, mdisplay, MAX_MANIFEST_BYTES);
	if (!read) {
		const auto &[step, error] = read.error();
		if (step == fs::TrustedStep::Directory)
			return one(error.message);
		if (step == fs::TrustedStep::Open)
			return {Problem{mdisplay, "Driver root has no manifest (" + error.message +
							  "), it was not built by unbounded-nvidia-setup"}};
		return {Problem{mdisplay, error.message}};
	}
	const std::string &text = read->text;
	if (expected && text == expected->to_json()) {
		auto problems = check_driver_tree(rfd->get(), *expected, root.display);
		if (manifest_out)
			*manifest_out = *expected;
		if (is_expected)
			*is_expected = true;
		return problems;
	}
	auto m = Manifest::from_json(text, mdisplay);
	if (!m)
		return {Problem{mdisplay, m.error().message}};
	auto problems = check_driver_tree(rfd->get(), *m, root.display);
	if (manifest_out)
		*manifest_out = std::move(*m);
	return problems;
}

}  // namespace unbounded
