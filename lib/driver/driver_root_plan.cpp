// The plan: the manifest of the root to build, from the discovered driver, before anything is written.
#include "driver_root.hpp"

#include "driver_root_steps.hpp"
#include "fs.hpp"

#include <algorithm>
#include <set>
#include <sys/stat.h>

namespace unbounded {

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

using root_build::mtime_ns;

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
		if (f.dest == libdir + "/libcuda.so." + driver.version) {
			std::string target = f.soname ? *f.soname : fs::basename(f.dest);
			add_link(libdir + "/libcuda.so", target, "");
		}
		if (f.dest == libdir + "/libnvidia-allocator.so." + driver.version)
			add_link(libdir + "/gbm/nvidia-drm_gbm.so",
				 "../" + (f.soname ? *f.soname : fs::basename(f.dest)), "");
	}
	std::sort(m.entries.begin(), m.entries.end(), [](const auto &a, const auto &b) { return a.path < b.path; });
	return m;
}

}  // namespace unbounded
