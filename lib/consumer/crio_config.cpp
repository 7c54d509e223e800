#include "crio_config.hpp"

#include "containerd_config.hpp"

#include "confined_open.hpp"
#include "fs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <fcntl.h>

namespace unbounded {
namespace {

constexpr const char *MAIN = "/etc/crio/crio.conf";
constexpr const char *DROP_INS = "/etc/crio/crio.conf.d";
constexpr std::size_t MAX_BYTES = 1u << 20;
constexpr std::size_t MAX_DROP_INS = 64;

}  // namespace

CrioConfig load_crio_config(int root)
{
	CrioConfig out;
	std::vector<std::string> paths{MAIN};
	if (auto dir = open_confined(root, DROP_INS, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, true}))
		if (auto names = fs::list_dir(dir->get(), DROP_INS))
			for (const auto &n : *names)
				if (n.ends_with(".conf") && paths.size() <= MAX_DROP_INS)
					paths.push_back(fs::join(DROP_INS, n));
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
		const auto &d = *doc;
		if (d.contains("crio") && d["crio"].is_object() && d["crio"].contains("runtime") && d["crio"]["runtime"].is_object() &&
		    d["crio"]["runtime"].contains("cdi_spec_dirs")) {
			const auto &dirs = d["crio"]["runtime"]["cdi_spec_dirs"];
			if (!dirs.is_array() || !std::all_of(dirs.begin(), dirs.end(), [](const auto &x) { return x.is_string(); })) {
				out.refused = path + ": cdi_spec_dirs is not a list of paths", out.refused_file = path;
				return out;
			}
			std::vector<std::string> v;
			for (const auto &x : dirs)
				if (v.size() < 64)
					v.push_back(x.template get<std::string>());
			out.cdi_spec_dirs = std::move(v);
			out.cdi_spec_dirs_from = path;
		}
	}
	return out;
}

std::string max_cdi_version_for_crio(int major, int minor)
{
	if (major > 1 || (major == 1 && minor >= 35))
		return "1.1.0";
	if (major == 1 && minor == 34)
		return "1.0.0";
	return "";
}

}  // namespace unbounded
