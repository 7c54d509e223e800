#include "containerd_config.hpp"

#include "bounded_parse.hpp"
#include "confined_open.hpp"
#include "fs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <fnmatch.h>
#include <map>
#include <set>
#include <sys/stat.h>

namespace unbounded {
namespace {

using json = nlohmann::json;

constexpr std::size_t MAX_CONFIG_BYTES = 1u << 20;  // containerd's own default config is 10 KiB
constexpr std::size_t MAX_CONFIG_FILES = 32;        // the main file and what it imports, transitively
constexpr std::size_t MAX_GLOB_MATCHES = 256;

struct Refused {
	std::string file, why;
};

// ',' then '}' outside strings and comments: an inline table with a trailing comma, which go-toml v1
// (containerd 1.x) refuses and toml++ (built for go-toml v2's wider reading) takes.
bool trailing_inline_comma(std::string_view t)
{
	char quote = 0;
	bool triple = false, comment = false, comma = false;
	for (std::size_t i = 0; i < t.size(); i++) {
		const char c = t[i];
		if (comment) {
			comment = c != '\n';
			continue;
		}
		if (quote) {
			if (c == '\\' && quote == '"')
				i++;
			else if (c == quote && (!triple || t.substr(i, 3) == std::string(3, quote))) {
				i += triple ? 2 : 0;
				quote = 0;
			}
			continue;
		}
		if (c == '"' || c == '\'') {
			quote = c;
			triple = t.substr(i, 3) == std::string(3, c);
			i += triple ? 2 : 0;
			comma = false;
		} else if (c == '#') {
			comment = true;
		} else if (c == ',') {
			comma = true;
		} else if (c == '}' && comma) {
			return true;
		} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			comma = false;
		}
	}
	return false;
}

// go-toml v1 (containerd 1.x) lets a [table] header reopen a table that dotted keys made earlier
// (`plugins."x".k = 1` then `[plugins]`), which TOML 1.0, toml++ and go-toml v2 refuse: read as
// go-toml v1 does, the text before that header and the text from it are two documents merged.
// `path`: the reopened header's keys. Along it tables merge; anywhere else a key met twice is "defined
// twice" to go-toml v1 (an inline table over a table included).
bool merge_reopened(json &to, const json &from, const std::vector<std::string> &path, std::size_t depth = 0)
{
	for (const auto &[k, v] : from.items()) {
		if (!to.contains(k))
			to[k] = v;
		else if (depth < path.size() && k == path[depth] && to[k].is_object() && v.is_object())
			return merge_reopened(to[k], v, path, depth + 1);
		else
			return false;
	}
	return true;
}

// "[plugins.\"io.containerd.grpc.v1.cri\"]" -> {"plugins", "io.containerd.grpc.v1.cri"}.
std::vector<std::string> header_keys(std::string_view h)
{
	std::vector<std::string> keys(1);
	char quote = 0;
	for (const char c : h.substr(1, h.size() >= 2 ? h.size() - 2 : 0)) {
		if (quote) {
			if (c == quote)
				quote = 0;
			else
				keys.back() += c;
		} else if (c == '"' || c == '\'') {
			quote = c;
		} else if (c == '.') {
			keys.emplace_back();
		} else {
			keys.back() += c;
		}
	}
	return keys;
}

Result<json> parse_go_toml_v1(std::string_view text, const std::string &path, unsigned splits = 0)
{
	// go-toml v1 skips a byte-order mark at the start of the file: so does this reading, before the
	// lines below are compared.
	if (splits == 0 && text.starts_with("\xef\xbb\xbf"))
		text.remove_prefix(3);
	auto doc = parse_toml_bounded(text, path, ParseLimits{32, 100000});
	if (doc || splits > 64 || doc.error().message.find("cannot redefine existing table") == std::string::npos)
		return doc;
	// "<path>:<line>:<column>: ...": the header's line starts the second document.
	const std::string &m = doc.error().message;
	const std::size_t colon = m.find(':', path.size() + 1);
	if (!m.starts_with(path + ":") || colon == std::string::npos)
		return doc;
	const long line = std::strtol(m.c_str() + path.size() + 1, nullptr, 10);
	std::size_t at = 0;
	for (long l = 1; l < line && at != std::string_view::npos; l++)
		at = text.find('\n', at) == std::string_view::npos ? std::string_view::npos : text.find('\n', at) + 1;
	if (line < 2 || at == std::string_view::npos || at == 0)
		return doc;
	// A header written twice is "duplicated tables" to go-toml v1 as well: only a table that dotted
	// keys made is reopened.
	auto trimmed = [](std::string_view l) {
		std::string out;
		for (const char c : l.substr(0, l.find('#')))
			if (c != ' ' && c != '\t' && c != '\r')
				out += c;
		return out;
	};
	const std::string header = trimmed(text.substr(at, text.find('\n', at) - at));
	for (std::size_t p = 0; p < at;) {
		const std::size_t nl = text.find('\n', p);
		if (trimmed(text.substr(p, nl - p)) == header)
			return doc;
		p = nl == std::string_view::npos ? at : nl + 1;
	}
	auto first = parse_go_toml_v1(text.substr(0, at), path, splits + 1);
	auto second = parse_go_toml_v1(text.substr(at), path, splits + 1);
	if (!first || !second)
		return doc;
	if (!merge_reopened(*first, *second, header_keys(header)))
		return doc;
	return first;
}

bool has_meta(std::string_view p) { return p.find_first_of("*?[\\") != std::string_view::npos; }

// Go's filepath.Match reports a malformed pattern (an unclosed '[', a trailing '\'); fnmatch(3)
// without FNM_PERIOD matches as Match does otherwise ('*' takes a leading dot too).
bool bad_pattern(std::string_view p)
{
	for (std::size_t i = 0; i < p.size(); i++) {
		if (p[i] == '\\' && ++i >= p.size())
			return true;
		if (p[i] == '[') {
			const std::size_t close = p.find(']', i + 2);
			if (close == std::string_view::npos)
				return true;
			i = close;
		}
	}
	return false;
}

class Globber {
public:
	explicit Globber(int root) : root_(root) {}

	// filepath.Glob: the directory part globbed first, then the last component in each match,
	// names sorted within a directory.
	std::vector<std::string> glob(const std::string &pattern)
	{
		if (!has_meta(pattern)) {
			struct stat st = {};
			auto parent = open_confined(root_, fs::dirname(pattern), ConfinedOpen{Confinement::InRoot, O_PATH | O_DIRECTORY, true});
			const bool there = parent && ::fstatat(parent->get(), fs::basename(pattern).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
			return there ? std::vector<std::string>{pattern} : std::vector<std::string>{};
		}
		std::string dir = fs::dirname(pattern);
		const std::string file = fs::basename(pattern);
		std::vector<std::string> out;
		if (!has_meta(dir)) {
			in_dir(dir, file, out);
			return out;
		}
		if (dir == pattern)
			throw Refused{"", "syntax error in pattern"};
		for (const auto &d : glob(dir))
			in_dir(d, file, out);
		return out;
	}

private:
	void in_dir(const std::string &dir, const std::string &pattern, std::vector<std::string> &out)
	{
		auto fd = open_confined(root_, dir, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, true});
		if (!fd)
			return;  // not a directory, or not there: no match, no error
		auto names = fs::list_dir(fd->get(), dir);
		if (!names)
			return;
		for (const auto &n : *names)
			if (::fnmatch(pattern.c_str(), n.c_str(), 0) == 0 && out.size() < MAX_GLOB_MATCHES)
				out.push_back(fs::join(dir, n));
	}

	int root_;
};

// v1MigratePluginName: a version-1 file's plugin names, as 2.x reads them.
std::string v1_plugin_uri(const std::string &name)
{
	static const std::pair<const char *, const char *> CORE[] = {
		{"cri", "io.containerd.grpc.v1.cri"}, {"cgroups", "io.containerd.monitor.v1.cgroups"}, {"linux", "io.containerd.runtime.v1.linux"}, {"scheduler", "io.containerd.gc.v1.scheduler"}, {"bolt", "io.containerd.metadata.v1.bolt"}, {"task", "io.containerd.runtime.v2.task"}, {"opt", "io.containerd.internal.v1.opt"}, {"restart", "io.containerd.internal.v1.restart"}, {"tracing", "io.containerd.internal.v1.tracing"}, {"otlp", "io.containerd.tracing.processor.v1.otlp"}, {"aufs", "io.containerd.snapshotter.v1.aufs"}, {"btrfs", "io.containerd.snapshotter.v1.btrfs"}, {"devmapper", "io.containerd.snapshotter.v1.devmapper"}, {"native", "io.containerd.snapshotter.v1.native"}, {"overlayfs", "io.containerd.snapshotter.v1.overlayfs"}, {"zfs", "io.containerd.snapshotter.v1.zfs"}};
	if (name.find('.') != std::string::npos)
		return name;
	for (const auto &[k, v] : CORE)
		if (name == k)
			return v;
	if (name.ends_with("-service"))
		return "io.containerd.service.v1." + name;
	if (name == "windows" || name == "windows-lcow")
		return "io.containerd.snapshotter.v1." + name;
	return "io.containerd.grpc.v1." + name;
}

// What 1.x's ValidateV2 takes as a plugin URI: "io.containerd." and at least four dotted parts.
bool plugin_uri(const std::string &p)
{
	return p.starts_with("io.containerd.") && std::count(p.begin(), p.end(), '.') >= 3;
}

// mergo.Merge with override, as 2.x merges plugin tables: tables key by key, anything else replaced.
void deep_merge(json &to, const json &from)
{
	for (const auto &[k, v] : from.items()) {
		if (v.is_object() && to.contains(k) && to[k].is_object())
			deep_merge(to[k], v);
		else
			to[k] = v;
	}
}

// The keys 2.x's CRI migration leaves behind (moved to other plugins or handled apart).
bool migration_skips(const std::string &k)
{
	static const std::set<std::string> SKIP = {"cni",
						   "containerd",
						   "sandbox_image",
						   "registry",
						   "image_decryption",
						   "max_concurrent_downloads",
						   "image_pull_progress_timeout",
						   "image_pull_with_sync_fs",
						   "stats_collect_period",
						   "disable_tcp_service",
						   "stream_server_address",
						   "stream_server_port",
						   "stream_idle_timeout",
						   "enable_tls_streaming",
						   "x509_key_pair_streaming"};
	return SKIP.count(k) > 0;
}

class Loader {
public:
	Loader(int root, int major) : root_(root), major_(major), globber_(root) {}

	LoadedConfig load(const std::string &main_file)
	{
		try {
			read_all(main_file);
			merge();
		} catch (const Refused &r) {
			out_.refused = r.why;
			out_.refused_file = r.file;
		}
		return std::move(out_);
	}

private:
	struct File {
		std::string path;
		json doc;
	};

	void read_all(const std::string &main_file)
	{
		std::vector<std::string> pending{go_clean_path(main_file)};
		std::set<std::string> loaded;
		while (!pending.empty()) {
			const std::string path = pending.front();
			pending.erase(pending.begin());
			if (loaded.count(path))
				continue;
			if (loaded.size() == MAX_CONFIG_FILES) {
				out_.warnings.push_back("containerd's configuration imports more than " + std::to_string(MAX_CONFIG_FILES) + " files: " +
							path + " and the rest not read, whether it uses CDI is not known");
				out_.unknown = true;
				return;
			}
			auto text = read_runtime_config(root_, path, MAX_CONFIG_BYTES);
			if (!text) {
				if (text.error().errnum == ENOENT && loaded.empty())
					return;  // no configuration: containerd runs on its defaults
				if (text.error().errnum == ENOENT)
					throw Refused{path, "it imports " + path + ", which does not exist"};
				// A directory, a device, a link loop: containerd fails to read it too. Only what is
				// past verify's own cap leaves the answer unknown.
				if (text.error().errnum != EFBIG)
					throw Refused{path, text.error().message};
				out_.warnings.push_back("containerd's configuration " + text.error().message + ": whether it uses CDI is not known");
				out_.unknown = true;
				loaded.insert(path);
				continue;
			}
			// Where the Go TOML library of this containerd reads differently from toml++.
			if (major_ >= 2 && text->starts_with("\xef\xbb\xbf"))
				throw Refused{path, path + ":1:1: a byte-order mark, which containerd 2.x's TOML reader refuses"};
			if (major_ < 2 && trailing_inline_comma(*text))
				throw Refused{path, path + ": an inline table with a trailing comma, which containerd 1.x's TOML reader refuses"};
			auto doc = major_ < 2 ? parse_go_toml_v1(*text, path) : parse_toml_bounded(*text, path, ParseLimits{32, 100000});
			if (!doc) {
				if (doc.error().errnum == PARSE_LIMIT_ERRNO) {
					out_.warnings.push_back("containerd's configuration " + doc.error().message + ": whether it uses CDI is not known");
					out_.unknown = true;
					loaded.insert(path);
					continue;
				}
				throw Refused{path, doc.error().message};
			}
			check_types(path, *doc);
			loaded.insert(path);
			out_.files.push_back(path);
			for (auto &imp : imports_of(path, *doc))
				pending.push_back(std::move(imp));
			files_.push_back(File{path, std::move(*doc)});
		}
	}

	// What containerd's TOML decoding into its Config refuses, for the keys verify reads.
	static void check_types(const std::string &path, const json &doc)
	{
		if (doc.contains("version") && !doc["version"].is_number_integer())
			throw Refused{path, path + ": version is not an integer"};
		if (doc.contains("imports") &&
		    (!doc["imports"].is_array() || !std::all_of(doc["imports"].begin(), doc["imports"].end(), [](const json &i) { return i.is_string(); })))
			throw Refused{path, path + ": imports is not a list of paths"};
		if (doc.contains("plugins") && !doc["plugins"].is_object())
			throw Refused{path, path + ": plugins is not a table"};
		for (const char *list : {"disabled_plugins", "required_plugins"})
			if (doc.contains(list) && !doc[list].is_array())
				throw Refused{path, path + ": " + list + " is not a list"};
	}

	std::vector<std::string> imports_of(const std::string &parent, const json &doc)
	{
		std::vector<std::string> out;
		if (!doc.contains("imports"))
			return out;
		for (const auto &i : doc["imports"]) {
			std::string p = go_clean_path(i.get<std::string>());
			if (p.empty() || p[0] != '/')
				p = go_clean_path(fs::join(fs::dirname(parent), p));
			if (p.find('*') == std::string::npos) {
				out.push_back(p);
				continue;
			}
			if (bad_pattern(p))
				throw Refused{parent, parent + ": the import " + printable(p) + " is not a valid pattern"};
			try {
				for (auto &m : globber_.glob(p))
					out.push_back(std::move(m));
			} catch (const Refused &r) {
				throw Refused{parent, parent + ": the import " + printable(p) + ": " + r.why};
			}
		}
		return out;
	}

	void merge() { major_ >= 2 ? merge_v2() : merge_v1(); }

	void merge_v1()
	{
		long version = 1;  // containerd 1.x's default configuration says version 1
		json plugins = json::object();
		std::map<std::string, std::string> plugin_from;
		std::vector<std::pair<std::string, std::string>> lists;  // disabled and required plugins, appended
		for (const auto &f : files_) {
			if (f.doc.contains("version") && f.doc["version"].get<long>() != 0)
				version = f.doc["version"].get<long>();
			if (f.doc.contains("plugins"))
				for (const auto &[k, v] : f.doc["plugins"].items()) {
					plugins[k] = v;  // the whole table replaced
					plugin_from[k] = f.path;
				}
			for (const char *list : {"disabled_plugins", "required_plugins"})
				if (f.doc.contains(list))
					for (const auto &p : f.doc[list]) {
						lists.emplace_back(f.path, p.is_string() ? p.get<std::string>() : p.dump());
						if (list == std::string_view("disabled_plugins"))
							disabled_.push_back(lists.back().second);
					}
		}
		out_.version = version;
		if (version > 2)
			throw Refused{last_setting("version"), "unsupported config version `" + std::to_string(version) + "` (containerd 1.x reads 1 and 2)"};
		if (version == 2) {
			for (const auto &[k, v] : plugins.items())
				if (!plugin_uri(k))
					throw Refused{plugin_from[k], "invalid plugin key URI \"" + printable(k) + "\" in " + plugin_from[k] +
									      ", expect io.containerd.x.vx (version = 2)"};
			for (const auto &[file, p] : lists)
				if (!plugin_uri(p))
					throw Refused{file, "invalid plugin URI \"" + printable(p) + "\" in " + file + ", expect io.containerd.x.vx"};
		}
		// GetVersion(): 1 only for 1 (and 0); a negative version names plugins by URI as 2 does,
		// without version 2's checks.
		out_.cri_table = version == 1 ? "cri" : "io.containerd.grpc.v1.cri";
		// V1DisabledFilter matches a plugin's ID, V2DisabledFilter its URI.
		for (const auto &[file, p] : lists)
			if (p == out_.cri_table && std::find(disabled_.begin(), disabled_.end(), p) != disabled_.end())
				out_.cri_disabled = p, out_.cdi_table_disabled = true;
		if (plugins.contains(out_.cri_table)) {
			out_.cri_table_from = plugin_from[out_.cri_table];
			take_cdi(plugins[out_.cri_table], out_.cri_table_from, out_.cri_table_from);
		}
	}

	// A version-1 file's plugins under their URIs, as 2.x's v1Migrate renames them.
	json renamed_v1_plugins(const File &f, const json &fp)
	{
		json renamed = json::object();
		for (const auto &[k, v] : fp.items()) {
			// Two names of one plugin (cri and its URI): v1Migrate keeps whichever Go's map
			// order gives last, so containerd itself does not read the file one way.
			if (renamed.contains(v1_plugin_uri(k))) {
				out_.ambiguous = true;
				out_.warnings.push_back("containerd " + std::to_string(major_) + ".x reads both [plugins." + k + "] and [plugins.\"" +
							v1_plugin_uri(k) + "\"] of " + f.path +
							" as one table, either one, in no fixed order: whether it uses CDI is not known");
			}
			renamed[v1_plugin_uri(k)] = v;
		}
		return renamed;
	}

	// ValidateVersion, on the merged lists: a version-1 file's names were renamed to URIs first.
	void validate_plugin_uris()
	{
		for (const auto &f : files_) {
			const bool renamed = renamed_[f.path];
			for (const char *list : {"disabled_plugins", "required_plugins"})
				if (f.doc.contains(list))
					for (const auto &p : f.doc[list]) {
						const std::string name = !p.is_string() ? p.dump() : renamed ? v1_plugin_uri(p.get<std::string>())
													     : p.get<std::string>();
						if (name.find('.') == std::string::npos)
							throw Refused{f.path, "invalid plugin URI \"" + printable(name) + "\" in " + f.path + ", expect io.containerd.x.vx"};
					}
		}
	}

	void merge_v2()
	{
		long version = 3;  // 2.x's default configuration
		json plugins = json::object();
		std::string enable_from, dirs_from;  // the last file that set each, in the table that counts
		std::string legacy_enable_from, legacy_dirs_from;
		for (const auto &f : files_) {
			long fv = f.doc.contains("version") ? f.doc["version"].get<long>() : 0;
			json fp = f.doc.contains("plugins") ? f.doc["plugins"] : json::object();
			// MigrateConfigTo(merged version so far): from 0 or 1 up to it, renaming a version-1
			// file's plugins on the way past 1, never down.
			const bool v1_file = (fv == 0 || fv == 1) && version >= 2;
			if (v1_file)
				fp = renamed_v1_plugins(f, fp);
			if ((fv == 0 || fv == 1) && version > fv) {
				// Its table of migrations covers versions 0 to 2: migrating past it (a version above
				// 3 merged so far) is an index out of range, a panic, and containerd does not start.
				if (version > 3)
					throw Refused{f.path, "containerd 2.x panics migrating " + f.path + " (version " + std::to_string(fv) +
								      ") to version " + std::to_string(version) +
								      " (index out of range in MigrateConfigTo) and does not start"};
				fv = version;
			}
			renamed_[f.path] = v1_file;
			if (f.doc.contains("disabled_plugins"))
				for (const auto &p : f.doc["disabled_plugins"])
					if (p.is_string())
						disabled_.push_back(v1_file ? v1_plugin_uri(p.get<std::string>()) : p.get<std::string>());
			auto sets = [&](const char *table, const char *key) {
				return fp.contains(table) && fp[table].is_object() && fp[table].contains(key);
			};
			if (sets("io.containerd.cri.v1.runtime", "enable_cdi"))
				enable_from = f.path;
			if (sets("io.containerd.cri.v1.runtime", "cdi_spec_dirs"))
				dirs_from = f.path;
			if (sets("io.containerd.grpc.v1.cri", "enable_cdi"))
				legacy_enable_from = f.path;
			if (sets("io.containerd.grpc.v1.cri", "cdi_spec_dirs"))
				legacy_dirs_from = f.path;
			deep_merge(plugins, fp);
			if (fv != 0)
				version = fv;
		}
		out_.version = version;
		validate_plugin_uris();
		if (version > 3)
			throw Refused{last_setting("version"), "expected containerd config version equal to or less than `3`, got `" +
								       std::to_string(version) + "`"};
		json runtime = plugins.contains("io.containerd.cri.v1.runtime") && plugins["io.containerd.cri.v1.runtime"].is_object()
				       ? plugins["io.containerd.cri.v1.runtime"]
				       : json::object();
		if (version < 3 && plugins.contains("io.containerd.grpc.v1.cri") && plugins["io.containerd.grpc.v1.cri"].is_object())
			for (const auto &[k, v] : plugins["io.containerd.grpc.v1.cri"].items())
				if (!migration_skips(k) && !runtime.contains(k)) {
					runtime[k] = v;
					if (k == "enable_cdi")
						enable_from = legacy_enable_from;
					if (k == "cdi_spec_dirs")
						dirs_from = legacy_dirs_from;
				}
		out_.cri_table = "io.containerd.cri.v1.runtime";
		for (const char *plugin : {"io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"})
			if (std::find(disabled_.begin(), disabled_.end(), plugin) != disabled_.end() && out_.cri_disabled.empty())
				out_.cri_disabled = plugin, out_.cdi_table_disabled = plugin == std::string_view("io.containerd.cri.v1.runtime");
		take_cdi(runtime, enable_from, dirs_from);
	}

	void take_cdi(const json &table, const std::string &enable_from, const std::string &dirs_from)
	{
		if (!table.is_object())
			return;
		if (table.contains("enable_cdi")) {
			if (!table["enable_cdi"].is_boolean())
				throw Refused{enable_from, "enable_cdi in " + enable_from + " is not true or false: the CRI plugin does not load"};
			out_.enable_cdi = table["enable_cdi"].get<bool>();
			out_.enable_cdi_from = enable_from;
		}
		if (table.contains("cdi_spec_dirs")) {
			const json &d = table["cdi_spec_dirs"];
			if (!d.is_array() || !std::all_of(d.begin(), d.end(), [](const json &x) { return x.is_string(); }))
				throw Refused{dirs_from, "cdi_spec_dirs in " + dirs_from + " is not a list of paths: the CRI plugin does not load"};
			std::vector<std::string> dirs;
			for (const auto &x : d)
				if (dirs.size() < 64)
					dirs.push_back(x.get<std::string>());
			out_.cdi_spec_dirs = std::move(dirs);
			out_.cdi_spec_dirs_from = dirs_from;
		}
	}

	std::string last_setting(const char *key) const
	{
		std::string file;
		for (const auto &f : files_)
			if (f.doc.contains(key))
				file = f.path;
		return file;
	}

	int root_, major_;
	Globber globber_;
	std::vector<File> files_;
	std::vector<std::string> disabled_;    // disabled_plugins of every file, as the version names them
	std::map<std::string, bool> renamed_;  // 2.x: whether a file's plugin names were migrated
	LoadedConfig out_;
};

}  // namespace

Result<std::string> read_runtime_config(int root_fd, const std::string &path, std::size_t cap)
{
	auto fd = open_confined(root_fd, path, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_NONBLOCK | O_NOCTTY, true});
	if (!fd)
		return fail(errno_error(fd.error().errnum, "Failed to open " + path));
	if (auto r = fs::require_regular(fd->get(), path); !r)
		return fail(r.error());
	return fs::read_fd(fd->get(), path, cap);
}

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

LoadedConfig load_containerd_config(int root_fd, const std::string &main_file, int major)
{
	return Loader(root_fd, major).load(main_file);
}

}  // namespace unbounded
