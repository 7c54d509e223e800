// The driver root's plan (the manifest of the root to build) and the check of a root's files against
// its manifest.
#include "driver_root.hpp"

#include "fs.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>

namespace unbounded {

// ---- The plan

namespace {

// Identity of a staging file for reuse: the inode, and its change time, which every write updates and
// no utimes() can set back (a file rewritten in place with its old mtime still differs).
std::string source_id(const struct stat &st)
{
	return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
	       std::to_string(static_cast<unsigned long long>(st.st_ino)) + ":" +
	       std::to_string(static_cast<long long>(st.st_ctim.tv_sec)) + "." + std::to_string(st.st_ctim.tv_nsec);
}

}  // namespace

Result<Manifest> plan_manifest(const DriverSet &driver, std::vector<std::string> &warnings)
{
	Manifest m;
	m.driver_version = driver.version;
	m.multiarch = driver.multiarch;
	std::set<std::string> paths;
	for (const auto &f : driver.files) {
		ManifestEntry e;
		e.path = f.dest;
		e.mode = f.kind == FileKind::Binary ? 0755 : 0644;  // setuid/setgid and write bits never copied
		e.size = static_cast<std::uint64_t>(f.source.st.st_size);
		e.mtime_ns = mtime_ns(f.source.st);
		e.source = f.source.display;
		e.source_id = source_id(f.source.st);
		paths.insert(e.path);
		m.entries.push_back(std::move(e));
	}
	auto add_link = [&](const std::string &path, const std::string &target, const std::string &why) {
		if (paths.count(path)) {
			if (!why.empty())
				warnings.push_back("Not creating " + path + " -> " + target + ": " + why);
			return;
		}
		paths.insert(path);
		ManifestEntry e;
		e.type = ManifestEntry::Type::Link;
		e.path = path;
		e.target = target;
		m.entries.push_back(std::move(e));
	};
	// Relative SONAME links next to each library (libcuda.so.1 -> libcuda.so.<v>), read from DT_SONAME.
	for (const auto &f : driver.files) {
		if (f.kind != FileKind::Library || !f.soname)
			continue;
		const std::string dir = fs::dirname(f.dest), name = fs::basename(f.dest);
		if (*f.soname == name)
			continue;
		add_link(fs::join(dir, *f.soname), name, "another file already has that name");
	}
	// The development link containers and nvidia-ctk's create-symlinks hook expect.
	const std::string libdir = "lib/" + driver.multiarch;
	for (const auto &f : driver.files) {
		const std::string name = f.soname.value_or(fs::basename(f.dest));
		if (f.dest == libdir + "/libcuda.so." + driver.version)
			add_link(libdir + "/libcuda.so", name, "");
		if (f.dest == libdir + "/libnvidia-allocator.so." + driver.version)
			add_link(libdir + "/gbm/nvidia-drm_gbm.so", "../" + name, "");
	}
	std::sort(m.entries.begin(), m.entries.end(), [](const auto &a, const auto &b) { return a.path < b.path; });
	return m;
}

// ---- The checks of a driver root

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

}  // namespace unbounded
