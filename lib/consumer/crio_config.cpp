#include "crio_config.hpp"

#include "containerd_config.hpp"

#include "confined_open.hpp"
#include "fs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>

namespace unbounded {
namespace {

constexpr const char *MAIN = "/etc/crio/crio.conf";
constexpr const char *DROP_INS = "/etc/crio/crio.conf.d";
constexpr std::size_t MAX_BYTES = 1u << 20;
constexpr std::size_t MAX_DROP_INS = 64;

constexpr int MAX_DEPTH = 8;

// The drop-ins as CRI-O takes them (pkg/config UpdateFromPath: filepath.Walk): every entry that is
// not a directory by lstat(), whatever its name (its documentation's "01-my-overwrite", a .dpkg-old),
// in subdirectories too, each directory's entries in lexical order, a subdirectory's before the
// names after it. A link is a file to the walk, read through.
void drop_ins(int root, const std::string &dir, int depth, std::vector<std::string> &paths)
{
	auto fd = open_confined(root, dir, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, depth == 0});
	auto names = fd ? fs::list_dir(fd->get(), dir) : fail(fd.error());
	if (!names)
		return;
	for (const auto &n : *names) {  // sorted
		if (paths.size() > MAX_DROP_INS)
			return;
		struct stat st = {};
		if (::fstatat(fd->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(st.st_mode))
			paths.push_back(fs::join(dir, n));
		else if (depth < MAX_DEPTH)
			drop_ins(root, fs::join(dir, n), depth + 1, paths);
	}
}

}  // namespace

CrioConfig load_crio_config(int root)
{
	CrioConfig out;
	std::vector<std::string> paths{MAIN};
	drop_ins(root, DROP_INS, 0, paths);
	for (const auto &path : paths) {
		auto text = read_runtime_config(root, path, MAX_BYTES);
		if (!text) {
			if (text.error().errnum != ENOENT)
				out.warnings.push_back("CRI-O's configuration " + text.error().message + ": which directories it reads CDI specs from is not known");
			continue;
		}
		auto doc = parse_toml_bounded(*text, path, ParseLimits{32, 100000});
		if (!doc) {
			out.refused = doc.error().message, out.refused_file = path;
			return out;
		}
		out.files.push_back(path);
		if (const nlohmann::json *dirs = table_at(*doc, {"crio", "runtime", "cdi_spec_dirs"})) {
			if (!dirs->is_array() || !std::all_of(dirs->begin(), dirs->end(), [](const auto &x) { return x.is_string(); })) {
				out.refused = path + ": cdi_spec_dirs is not a list of paths", out.refused_file = path;
				return out;
			}
			std::vector<std::string> v;
			for (const auto &x : *dirs)
				if (v.size() < 64)
					v.push_back(x.template get<std::string>());
			out.cdi_spec_dirs = std::move(v);
			out.cdi_spec_dirs_from = path;
		}
	}
	return out;
}

}  // namespace unbounded
