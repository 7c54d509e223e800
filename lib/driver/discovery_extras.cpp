// What the root takes beside the libraries when the host staged it: the DLSS DLLs for Proton, the
// graphics configuration files, OptiX's data file.
#include "discovery.hpp"

#include "format.hpp"
#include "fs.hpp"
#include "graphics_config.hpp"
#include "pe.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>

namespace unbounded {

// Where a tree may hold the DLSS DLLs: nvidia/wine/ of a host lib dir, and, on Debian, the chosen
// flavour's own nvidia/<flavour>/nvidia/wine/ (never another flavour's: another driver's files).
std::vector<std::string> Discovery::wine_dirs(std::size_t tree) const
{
	std::vector<std::string> dirs{WINE_DIR};
	for (const auto &l : listings_)
		if (l.tree == tree && l.dir.starts_with("nvidia/") && l.dir.find('/', 7) == std::string::npos &&
		    !other_flavours_.count(l.dir.substr(7)))
			dirs.push_back(l.dir + "/" + WINE_DIR);
	return dirs;
}

// 5c. The DLSS DLLs for Proton (WINE_DLLS), where a tree holds nvidia/wine/ (wine_dirs()). After
// check_native, which settles the multiarch they go under. A file of that name that is not a PE file
// (pe.hpp) is skipped with a warning.
Result<void> Discovery::add_wine_dlls()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		struct stat st = {};
		if (::fstatat(st_.trees()[t].fd.get(), "nvidia", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;  // one fstatat for a tree without it: the boot path stays cheap
		for (const auto &dir : wine_dirs(t))
			add_wine_dlls_in(t, dir);
	}
	return {};
}

void Discovery::add_wine_dlls_in(std::size_t t, const std::string &dir)
{
	for (const char *name : WINE_DLLS) {
		const std::string dest = "lib/" + out_.multiarch + "/" + WINE_DIR + "/" + name;
		if (by_dest_.count(dest))
			continue;
		const std::string rel = dir + "/" + name;
		const std::string display = fs::join(st_.trees()[t].display, rel);
		auto src = resolve_optional(t, rel, "DLSS file");
		if (!src)
			continue;
		std::string why;
		if (!S_ISREG(src->st.st_mode))
			why = "not a regular file";
		else if (static_cast<std::uint64_t>(src->st.st_size) > MAX_WINE_DLL_BYTES)
			why = "larger than " + format_bytes(MAX_WINE_DLL_BYTES);
		else if (auto fd = st_.open_regular(*src); !fd)
			why = fd.error().message;
		else if (!pe::is_pe_file(fd->get(), src->st.st_size))
			why = "not a Windows PE file";
		if (!why.empty()) {
			out_.warnings.push_back("Skipping " + display + ": " + why);
			continue;
		}
		add(DriverFile{FileKind::Data, dest, std::move(*src), std::nullopt, {}});
	}
}

// 5b. The graphics configuration files (graphics_config.hpp), where the host bound their directory.
// Only NVIDIA's: by name, then by the library they name, which must be where a pod's loader will
// look for it (after check_native: the root's libraries and multiarch are known). Another vendor's
// file of the same name, one that is not what it claims, one naming a library the pod cannot
// load, or a link that leads out of the staging mounts, is skipped with a warning; a missing one
// is not an error (most compute hosts bind none of these directories).
// Cheap on the boot path: a tree's own root is already listed (the names pass
// could_be_driver_file), and a parent directory is looked into only when its first component
// is a directory of the tree (one fstatat each, remembered per tree).
Result<void> Discovery::add_graphics_configs()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		const std::vector<std::string> *in_root = nullptr;
		for (const auto &l : listings_)
			if (l.tree == t && l.dir.empty())
				in_root = &l.names;
		std::vector<std::pair<std::string_view, bool>> is_dir;  // first component -> a directory of the tree
		auto present = [&](std::string_view dir, std::string_view name) {
			if (dir.empty())
				return in_root && std::find(in_root->begin(), in_root->end(), name) != in_root->end();
			const std::string_view first = dir.substr(0, dir.find('/'));
			for (const auto &[n, d] : is_dir)
				if (n == first)
					return d;
			struct stat st = {};
			const bool d = ::fstatat(st_.trees()[t].fd.get(), std::string(first).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				       S_ISDIR(st.st_mode);
			is_dir.emplace_back(first, d);
			return d;
		};
		for (const auto &kind : graphics_config::KINDS) {
			const std::string_view parent = kind.parent;
			const std::string_view candidates[] = {"", parent.substr(parent.rfind('/') + 1), parent};
			if (std::none_of(std::begin(candidates), std::end(candidates), [&](std::string_view d) { return present(d, kind.name); }))
				continue;
			const std::string dest = std::string(kind.root_dir) + "/" + kind.name;
			if (by_dest_.count(dest))
				continue;
			for (const std::string_view dir_view : candidates) {
				if (!present(dir_view, kind.name))
					continue;
				if (take_graphics_config(t, kind, std::string(dir_view), dest))
					break;
			}
		}
	}
	return {};
}

// One candidate place of a graphics configuration file: true when it decided the file (taken, or
// skipped with a warning), false to try the next place.
bool Discovery::take_graphics_config(std::size_t t, const graphics_config::Kind &kind, const std::string &dir, const std::string &dest)
{
	const std::string rel = fs::join(dir, kind.name);
	const std::string display = fs::join(st_.trees()[t].display, rel);
	auto src = resolve_optional(t, rel, "graphics configuration file");
	if (!src) {
		if (auto r = st_.resolve(t, rel); !r && (r.error().errnum == ENOENT || r.error().errnum == ENOTDIR) &&
						  is_link(t, dir, kind.name)) {
			out_.warnings.push_back(r.error().message + ", skipping this graphics configuration file");
			return true;
		}
		return false;
	}
	if (!S_ISREG(src->st.st_mode)) {
		out_.warnings.push_back("Skipping " + display + ", not a regular file");
		return true;
	}
	auto fd = st_.open_regular(*src);
	if (!fd) {
		out_.warnings.push_back(fd.error().message + ", skipping this graphics configuration file");
		return true;
	}
	auto text = fs::read_fd(fd->get(), src->display, graphics_config::MAX_BYTES);
	std::string why;
	if (!text)
		why = text.error().message;
	else if (const auto lib = graphics_config::nvidia_library_of(kind, *text, src->display, why); lib.empty()) {
		if (why.empty())
			why = src->display + " names no library";
	} else
		why = graphics_config::unloadable(lib, "/lib/" + out_.multiarch, [&](std::string_view n) { return in_libdir(n); });
	if (!why.empty()) {
		out_.warnings.push_back("Skipping " + display + ": " + why);
		return true;
	}
	add(DriverFile{FileKind::Config, dest, std::move(*src), std::nullopt, {}});
	return true;
}

// 5e. nvoptix.bin (OPTIX_DATA), when the root has libnvoptix.so.<version>: first beside it, then
// where a tree is the host's share directory. The file is the library's own version's: one beside
// a library of another version is never taken (a staging tree holds one version's files).
Result<void> Discovery::add_optix_data()
{
	if (!in_.optix_data || by_dest_.count(OPTIX_DATA_DEST))
		return {};
	auto lib = by_dest_.find("lib/" + out_.multiarch + "/libnvoptix.so." + out_.version);
	if (lib == by_dest_.end())
		return {};  // no OptiX in this driver's staged files: nothing reads the data
	std::vector<std::pair<std::size_t, std::string>> candidates{
		{lib->second.source.tree, fs::join(fs::dirname(lib->second.source.rel) == "." ? "" : fs::dirname(lib->second.source.rel), OPTIX_DATA)}};
	for (std::size_t t = 0; t < st_.trees().size(); t++)
		for (const char *rel : OPTIX_DATA_IN_SHARE)
			candidates.emplace_back(t, rel);
	for (const auto &[t, rel] : candidates) {
		auto src = resolve_optional(t, rel, "OptiX data file");
		if (!src)
			continue;
		const std::string display = src->display;
		if (!S_ISREG(src->st.st_mode) || static_cast<std::uint64_t>(src->st.st_size) > MAX_OPTIX_DATA_BYTES) {
			out_.warnings.push_back("Skipping " + display + ": " +
						(S_ISREG(src->st.st_mode) ? "larger than " + format_bytes(MAX_OPTIX_DATA_BYTES) : "not a regular file"));
			continue;
		}
		add(DriverFile{FileKind::Data, OPTIX_DATA_DEST, std::move(*src), std::nullopt, {}});
		return {};
	}
	out_.warnings.push_back(lib->second.source.display + " is in the root but its " + OPTIX_DATA +
				" is not in the staging mounts: OptiX fails in containers; bind the host directory that holds it "
				"(/usr/share/nvidia, or the one beside libnvoptix on Debian)");
	return {};
}

}  // namespace unbounded
