#include "containerd_config.hpp"

#include "bounded_parse.hpp"
#include "confined_open.hpp"
#include "fs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <fcntl.h>
#include <fnmatch.h>
#include <set>

namespace unbounded {
namespace {

using json = nlohmann::json;

constexpr std::size_t MAX_CONFIG_BYTES = 1u << 20;  // containerd's own default config is 10 KiB
constexpr std::size_t MAX_CONFIG_FILES = 32;        // the main file and what it imports, transitively
constexpr std::size_t MAX_GLOB_MATCHES = 256;

// The names in `dir` that match `pattern`, added to `out`: not a directory, or not there, is no match
// and no error.
void glob_in_dir(int root, const std::string &dir, const std::string &pattern, std::vector<std::string> &out)
{
	auto fd = open_confined(root, dir, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, true});
	auto names = fd ? fs::list_dir(fd->get(), dir) : fail(fd.error());
	if (!names)
		return;
	for (const auto &n : *names)
		if (::fnmatch(pattern.c_str(), n.c_str(), 0) == 0 && out.size() < MAX_GLOB_MATCHES)
			out.push_back(fs::join(dir, n));
}

// filepath.Glob of a `pattern` that has a meta character: the directory part globbed first (when it
// has one too), then the last component in each match, names sorted within a directory.
std::vector<std::string> glob(int root, const std::string &pattern)
{
	const std::string dir = fs::dirname(pattern), file = fs::basename(pattern);
	std::vector<std::string> out;
	for (const auto &d : dir.find_first_of("*?[\\") == std::string::npos ? std::vector<std::string>{dir} : glob(root, dir))
		glob_in_dir(root, d, file, out);
	return out;
}

// Go's path/filepath.Clean, lexically.
std::string go_clean_path(const std::string &path)
{
	if (path.empty())
		return ".";
	const bool rooted = path[0] == '/';
	std::vector<std::string> parts;
	std::size_t i = 0;
	while (i <= path.size()) {
		const std::size_t j = std::min(path.find('/', i), path.size());
		const std::string part = path.substr(i, j - i);
		if (part == "..") {
			if (!parts.empty() && parts.back() != "..")
				parts.pop_back();
			else if (!rooted)
				parts.push_back("..");
		} else if (!part.empty() && part != ".") {
			parts.push_back(part);
		}
		i = j + 1;
	}
	std::string out = rooted ? "/" : "";
	for (std::size_t k = 0; k < parts.size(); k++)
		out += (k ? "/" : "") + parts[k];
	return out.empty() ? "." : out;
}

}  // namespace

ContainerdImports walk_containerd_imports(int root_fd, const std::string &main_file)
{
	ContainerdImports out;
	std::vector<std::string> pending{go_clean_path(main_file)};
	std::set<std::string> loaded;
	while (!pending.empty() && out.missing.empty() && out.unknown.empty()) {
		const std::string path = pending.front();
		pending.erase(pending.begin());
		if (loaded.count(path))
			continue;
		if (loaded.size() == MAX_CONFIG_FILES) {
			out.unknown = "it imports more than " + std::to_string(MAX_CONFIG_FILES) + " files";
			break;
		}
		auto text = read_runtime_config(root_fd, path, MAX_CONFIG_BYTES);
		if (!text && text.error().errnum == ENOENT) {
			if (!loaded.empty())
				out.missing = path;
			break;  // no main file: containerd's defaults
		}
		auto doc = text ? parse_toml_bounded(*text, path, ParseLimits{32, 100000}) : Result<json>(fail(text.error()));
		if (!doc || !doc->is_object()) {
			out.unknown = doc ? path + " is no TOML table" : doc.error().message;
			break;
		}
		loaded.insert(path);
		out.files.push_back(path);
		// A file below version 2 has its plugins renamed to URIs (v1Migrate), "cri" and its URI
		// alike, in Go's map order.
		// The merged version as LoadConfig makes it: a file of version 0 or 1 is first migrated up to
		// the version merged so far (never down), and a 0 does not override (mergo).
		const json *version = table_at(*doc, {"version"});
		long long v = version && version->is_number_integer() ? version->get<long long>() : 0;
		if (v <= 1 && v >= 0 && out.version > v)
			v = out.version;
		if (v != 0)
			out.version = v, out.version_file = path;
		const json *plugins = table_at(*doc, {"plugins"});
		if ((!version || (version->is_number_integer() && version->get<long long>() <= 1)) && plugins && plugins->is_object() &&
		    plugins->contains("cri") && plugins->contains(CRI_1) && out.ambiguous.empty())
			out.ambiguous = path;
		const json *imports = table_at(*doc, {"imports"});
		if (!imports || !imports->is_array())
			continue;
		for (const auto &i : *imports) {
			if (!i.is_string())
				continue;
			std::string p = go_clean_path(i.get<std::string>());
			if (p[0] != '/')
				p = go_clean_path(fs::dirname(path) + "/" + p);
			if (p.find('*') == std::string::npos) {
				pending.push_back(p);
				continue;
			}
			for (auto &m : glob(root_fd, p))
				pending.push_back(std::move(m));
		}
	}
	return out;
}

Result<std::string> read_runtime_config(int root_fd, const std::string &path, std::size_t cap)
{
	auto fd = open_confined(root_fd, path, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_NONBLOCK | O_NOCTTY, true});
	if (!fd)
		return fail(errno_error(fd.error().errnum, "Failed to open " + path));
	if (auto r = fs::require_regular(fd->get(), path); !r)
		return fail(r.error());
	return fs::read_fd(fd->get(), path, cap);
}

}  // namespace unbounded
