#include "config.hpp"

#include "unit_name.hpp"
#include "side_specs.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fcntl.h>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <yaml-cpp/yaml.h>

namespace unbounded {

static constexpr long long MAX_DURATION_MS = 1LL << 40;

Result<Millis> parse_duration(std::string_view text)
{
	auto bad = [&] { return fail(usage_error("invalid duration '" + std::string(text) + "'")); };
	while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
		text.remove_suffix(1);
	if (text.empty())
		return bad();
	long long total = 0;
	std::string_view rest = text;
	while (!rest.empty()) {
		long long value = 0;
		auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
		if (ec != std::errc() || ptr == rest.data() || value < 0)
			return bad();
		rest.remove_prefix(static_cast<std::size_t>(ptr - rest.data()));
		std::size_t ulen = 0;
		while (ulen < rest.size() && std::isalpha(static_cast<unsigned char>(rest[ulen])))
			ulen++;
		std::string_view unit = rest.substr(0, ulen);
		rest.remove_prefix(ulen);
		long long factor;
		if (unit.empty()) {
			if (rest.empty() && total == 0 && text.find_first_not_of("0123456789") == std::string_view::npos)
				factor = 1000;  // bare number: seconds
			else
				return bad();
		} else if (unit == "ms") {
			factor = 1;
		} else if (unit == "s" || unit == "sec") {
			factor = 1000;
		} else if (unit == "m" || unit == "min") {
			factor = 60'000;
		} else if (unit == "h") {
			factor = 3'600'000;
		} else {
			return bad();
		}
		// Each term and the sum are bounded (2^40 ms, about 35 years): the longest duration a unit
		// may carry, timeouts derived from it included, stays far inside what systemd accepts.
		if (value > MAX_DURATION_MS / factor || total > MAX_DURATION_MS - value * factor)
			return bad();
		total += value * factor;
	}
	return Millis(total);
}

std::string format_duration(Millis d)
{
	auto ms = d.count();
	if (ms % 1000 == 0)
		return std::to_string(ms / 1000) + "s";
	return std::to_string(ms) + "ms";
}

namespace {

// Every boolean of the file takes the same words (`enabled: on` once blocked containerd).
std::optional<bool> boolean_word(std::string_view s)
{
	if (s == "true" || s == "yes" || s == "on")
		return true;
	if (s == "false" || s == "no" || s == "off")
		return false;
	return std::nullopt;
}

}  // namespace

std::optional<Enabled> parse_enabled(std::string_view s)
{
	if (s == "auto")
		return Enabled::Auto;
	if (const auto b = boolean_word(s))
		return *b ? Enabled::Yes : Enabled::No;
	return std::nullopt;
}

std::optional<unsigned> parse_gpu_count(std::string_view s)
{
	// A node has at most a few dozen GPUs; the bound keeps the number an honest count.
	if (s.empty() || !all_digits(s) || s.size() > 4)
		return std::nullopt;
	const unsigned long n = std::stoul(std::string(s));
	if (n < 1 || n > MAX_EXPECTED_GPUS)
		return std::nullopt;
	return static_cast<unsigned>(n);
}

std::string Config::origin(const std::string &key) const
{
	const auto it = origins.find(key);
	return it == origins.end() ? std::string(DEFAULT_CONFIG_PATH) : it->second;
}

namespace {

struct Ctx {
	const std::string &file;
	std::map<std::string, int> *lines;  // key -> line, for checks that involve several keys
	Error at(const YAML::Node &node, const std::string &key, const std::string &what) const
	{
		return at_line(node.Mark().line + 1, key, what);
	}
	Error at_line(int line, const std::string &key, const std::string &what) const
	{
		return usage_error(file + ":" + std::to_string(line) + ": " + what + " '" + printable(key) + "'");
	}
};

// An absolute path in its one normal form: no empty, "." or ".." components (so "/./etc" cannot
// pass for a deeper path than it is), no control characters or invalid UTF-8 (these paths end up in
// unit files and log lines), no trailing slash.
std::optional<std::string> normal_path(const std::string &s)
{
	if (s.empty() || s.front() != '/' || !is_printable(s) || s.size() > 1024)
		return std::nullopt;
	std::string out;
	for (const auto &c : fs::split_path(s)) {
		if (c == "." || c == "..")
			return std::nullopt;
		out += "/" + c;
	}
	return out.empty() ? "/" : out;
}

using Handler = std::function<Result<void>(const YAML::Node &value, const std::string &key)>;

Result<std::string> scalar(const Ctx &c, const YAML::Node &v, const std::string &key)
{
	if (!v.IsScalar())
		return fail(c.at(v, key, "expected a string value for key"));
	return v.Scalar();
}

// A scalar key whose text `parse` turns into the value of `out`; nullopt: refused with `expected`.
template <class T, class Parse> Handler parsed_handler(const Ctx &c, T &out, Parse parse, std::string expected)
{
	return [&c, &out, parse, expected](const YAML::Node &v, const std::string &key) -> Result<void> {
		auto s = scalar(c, v, key);
		if (!s)
			return fail(s.error());
		auto parsed = parse(*s);
		if (!parsed)
			return fail(c.at(v, key, expected));
		out = std::move(*parsed);
		return {};
	};
}

Handler path_handler(const Ctx &c, std::string &out)
{
	return parsed_handler(c, out, normal_path, "expected an absolute path without '.' or '..' components or control characters for key");
}

Handler duration_handler(const Ctx &c, Millis &out, Millis minimum = Millis(0))
{
	return [&c, &out, minimum](const YAML::Node &v, const std::string &key) -> Result<void> {
		auto s = scalar(c, v, key);
		if (!s)
			return fail(s.error());
		auto d = parse_duration(*s);
		if (!d)
			return fail(c.at(v, key, "invalid duration '" + printable(*s) + "' for key"));
		if (*d < minimum)
			return fail(c.at(v, key, "duration '" + printable(*s) + "' is below the minimum of " + format_duration(minimum) + " for key"));
		out = *d;
		return {};
	};
}

Handler bool_handler(const Ctx &c, bool &out)
{
	return parsed_handler(c, out, boolean_word, "expected true or false for key");
}

Result<void> walk(const Ctx &c, const YAML::Node &map, const std::string &prefix,
		  const std::map<std::string, Handler> &handlers)
{
	if (!map.IsMap())
		return fail(c.at(map, prefix.empty() ? "(top level)" : prefix, "expected a mapping at"));
	std::set<std::string> seen;
	for (const auto &kv : map) {
		if (!kv.first.IsScalar())
			return fail(c.at(kv.first, prefix.empty() ? "(top level)" : prefix, "expected a plain key under"));
		const std::string key = kv.first.Scalar();
		const std::string full = prefix.empty() ? key : prefix + "." + key;
		auto it = handlers.find(key);
		if (it == handlers.end())
			return fail(c.at(kv.first, full, "unknown key"));
		if (!seen.insert(key).second)
			return fail(c.at(kv.first, full, "duplicate key"));
		if (c.lines)
			(*c.lines)[full] = kv.first.Mark().line + 1;
		if (kv.second.IsNull())
			return fail(c.at(kv.first, full, "missing value for key"));
		if (auto r = it->second(kv.second, full); !r)
			return r;
	}
	return {};
}

bool inside(const std::string &path, const std::string &dir)
{
	return path == dir || path.starts_with(dir + "/");
}

// The driver root is replaced and its old tree deleted on every run: it must be a directory of its
// own, deep enough not to be a system directory, holding none of the other configured paths.
Result<void> check_paths(const Ctx &c, const Config &cfg)
{
	// Said at `key`'s line, or at `otherwise`'s where the file does not set `key`.
	auto at_key = [&](const char *key, const std::string &why, const char *otherwise = nullptr) {
		if (otherwise && !c.lines->count(key))
			key = otherwise;
		auto it = c.lines->find(key);
		return fail(c.at_line(it == c.lines->end() ? 1 : it->second, key, why));
	};
	if (cfg.driver_root == "/" || fs::dirname(cfg.driver_root) == "/")
		return at_key("driver_root", "must not be / or a top-level directory:");
	const std::pair<const char *, const std::string *> others[] = {
		{"staging", &cfg.staging},
		{"cdi_spec", &cfg.cdi_spec},
		{"imex_cdi_spec", &cfg.imex_cdi_spec},
		{"nvswitch_cdi_spec", &cfg.nvswitch_cdi_spec},
		{"gdrcopy_cdi_spec", &cfg.gdrcopy_cdi_spec},
		{"gds_cdi_spec", &cfg.gds_cdi_spec},
		{"device_plugin_spec", &cfg.device_plugin_spec},
		{"cdi_hook", &cfg.cdi_hook},
	};
	for (const auto &[key, path] : others)
		if (inside(*path, cfg.driver_root) || inside(cfg.driver_root, *path))
			return at_key(key, std::string("driver_root and ") + key + " overlap (" + cfg.driver_root + ", " + *path + "):", "driver_root");
	for (const char *system_dir : {"/usr", "/etc", "/boot", "/dev", "/proc", "/sys"})
		if (inside(cfg.driver_root, system_dir))
			return at_key("driver_root", std::string("must not lie in ") + system_dir + ":");
	// Each spec is written, and removed when its devices are gone, on its own: two keys naming one
	// file would have a run remove what it has just written.
	// In the machine /var/run is /run, so both spellings are one file.
	auto same_file = [](const std::string &a, const std::string &b) {
		auto canon = [](const std::string &p) { return p.starts_with("/var/run/") ? p.substr(4) : p; };
		return canon(a) == canon(b);
	};
	std::vector<std::pair<const char *, const std::string *>> specs{{"cdi_spec", &cfg.cdi_spec}};
	for (const auto &side : side_specs(cfg))
		specs.emplace_back(side.key, side.path);
	for (std::size_t i = 0; i < specs.size(); i++)
		for (std::size_t j = 0; j < i; j++)
			if (same_file(*specs[i].second, *specs[j].second))
				return at_key(specs[i].first,
					      std::string(specs[j].first) + " and " + specs[i].first + " name the same file (" + *specs[i].second + "):",
					      specs[j].first);
	// A spec of ours is overwritten on every run and removed as ours when its devices go: it must be
	// no file another writer owns.
	for (const auto &[key, path] : specs) {
		const std::string name = fs::basename(*path);
		std::string owner;
		if (same_file(*path, cfg.device_plugin_spec))
			owner = "device_plugin_spec, the device plugin's spec";
		// The vendors' own name spaces, whatever the directory or extension: the device plugin's
		// k8s.device-plugin.nvidia.com-<class>.json (gpu, gdrcopy, gds, mofed) and the DRA driver's
		// k8s.gpu.nvidia.com-claim_<uid>.yaml; nvidia-ctk's nvidia-cdi-refresh writes /var/run/cdi/nvidia.yaml.
		else if (name.starts_with("k8s.device-plugin.nvidia.com-"))
			owner = "the NVIDIA device plugin's name (k8s.device-plugin.nvidia.com-*.json)";
		else if (name.starts_with("k8s.gpu.nvidia.com-"))
			owner = "the NVIDIA DRA driver's name (k8s.gpu.nvidia.com-claim_*.yaml)";
		else if (same_file(*path, "/var/run/cdi/nvidia.yaml"))
			owner = "nvidia-ctk's spec (nvidia-cdi-refresh writes /var/run/cdi/nvidia.yaml)";
		if (!owner.empty())
			return at_key(key, std::string(key) + " names " + *path + ", which is " + owner + ": setup would overwrite it and remove it as its own:",
				      "device_plugin_spec");
	}
	return {};
}

// The keys of the `licensing:` section. The handlers hold references to `c` and `lic`, which
// outlive them (parse_config's).
std::map<std::string, Handler> licensing_handlers(const Ctx &c, LicensingConfig &lic)
{
	return {
		{"source_dir", path_handler(c, lic.source_dir)},
		{"legacy_files",
		 [&](const YAML::Node &v, const std::string &key) -> Result<void> {
			 return walk(c, v, key,
				     {{"gridd_conf", path_handler(c, lic.legacy_gridd_conf)},
				      {"client_token", path_handler(c, lic.legacy_client_token)}});
		 }},
		{"gridd_conf", path_handler(c, lic.gridd_conf_target)},
		{"client_token", path_handler(c, lic.client_token_target)},
		{"state_dir", path_handler(c, lic.state_dir)},
		{"jitter", duration_handler(c, lic.jitter)},
		{"auto_reload", bool_handler(c, lic.auto_reload)},
		{"reload_interval", duration_handler(c, lic.reload_interval, Millis(1000))},
		{"settle_time", duration_handler(c, lic.settle_time)},
		{"stop_timeout", duration_handler(c, lic.stop_timeout, Millis(1000))},
		// 0 would raise NvidiaLicenseNotAcquired the moment nvidia-gridd starts, before it could ask.
		{"not_acquired_after", duration_handler(c, lic.not_acquired_after, Millis(1000))},
		// It goes into unit text (After=, a drop-in's directory): systemd's own rule, nothing escaped.
		{"gridd_unit", parsed_handler(
				       c, lic.gridd_unit,
				       [](const std::string &s) { return valid_service_name(s) ? std::optional(s) : std::nullopt; },
				       "expected a service unit name for key")},
	};
}

// A list of strings, each taken by `take` (false: refused, with `invalid` naming what it expected).
// The list replaces the default.
Handler list_handler(const Ctx &c, const std::string &expected, const std::string &invalid,
		     std::function<bool(const std::string &)> take, std::function<void()> clear)
{
	return [&c, expected, invalid, take, clear](const YAML::Node &v, const std::string &key) -> Result<void> {
		if (!v.IsSequence())
			return fail(c.at(v, key, "expected a list of " + expected + " for key"));
		clear();
		for (const auto &item : v) {
			auto s = scalar(c, item, key);
			if (!s)
				return fail(s.error());
			if (!take(*s))
				return fail(c.at(item, key, "invalid " + invalid + " '" + printable(*s) + "' in"));
		}
		return {};
	};
}

// A DNS label, as Kubernetes names namespaces.
bool namespace_name(const std::string &s)
{
	auto lower_or_digit = [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)); };
	return !s.empty() && s.size() <= 63 && lower_or_digit(s.front()) && lower_or_digit(s.back()) &&
	       std::all_of(s.begin(), s.end(), [&](char ch) { return lower_or_digit(ch) || ch == '-'; });
}

// The keys of the `consumers:` section.
std::map<std::string, Handler> consumers_handlers(const Ctx &c, ConsumersConfig &cc)
{
	return {
		{"enabled", bool_handler(c, cc.enabled)},
		{"selectors", list_handler(
				      c, "label selectors (key=value[,key=value])", "label selector",
				      [&cc](const std::string &s) {
					      auto sel = parse_consumer_selector(s);
					      if (sel)
						      cc.selectors.push_back(std::move(*sel));
					      return sel.has_value();
				      },
				      [&cc] { cc.selectors.clear(); })},
		{"namespaces", list_handler(
				       c, "namespaces ([] for any)", "namespace",
				       [&cc](const std::string &s) {
					       if (namespace_name(s))
						       cc.namespaces.push_back(s);
					       return namespace_name(s);
				       },
				       [&cc] { cc.namespaces.clear(); })},
		{"runtime_endpoint", path_handler(c, cc.runtime_endpoint)},
		{"wait", duration_handler(c, cc.wait, Millis(1000))},
		{"stop_timeout", duration_handler(c, cc.stop_timeout, Millis(1000))},
	};
}

// `parse` that also records, when it succeeds, that `key` was set in this file (Config::origins).
template <class Parse> auto with_origin(const Ctx &c, Config &cfg, const char *key, Parse parse)
{
	return [&c, &cfg, key, parse](std::string_view s) {
		auto parsed = parse(s);
		if (parsed)
			cfg.origins[key] = c.file;
		return parsed;
	};
}

// The top-level keys; `licensing` and `refresh` walk their sections with the given handlers.
std::map<std::string, Handler> top_handlers(const Ctx &c, Config &cfg, const std::map<std::string, Handler> &licensing_keys,
					    const std::map<std::string, Handler> &refresh_keys, const std::map<std::string, Handler> &consumers_keys)
{
	return {
		{"enabled", parsed_handler(c, cfg.enabled, with_origin(c, cfg, "enabled", parse_enabled), "expected auto, true or false for key")},
		{"staging", path_handler(c, cfg.staging)},
		{"driver_root", path_handler(c, cfg.driver_root)},
		{"cdi_spec", path_handler(c, cfg.cdi_spec)},
		{"imex_cdi_spec", path_handler(c, cfg.imex_cdi_spec)},
		{"nvswitch_cdi_spec", path_handler(c, cfg.nvswitch_cdi_spec)},
		{"gdrcopy_cdi_spec", path_handler(c, cfg.gdrcopy_cdi_spec)},
		{"gds_cdi_spec", path_handler(c, cfg.gds_cdi_spec)},
		{"device_plugin_spec", path_handler(c, cfg.device_plugin_spec)},
		{"cdi_hook", path_handler(c, cfg.cdi_hook)},
		{"containerd_config", path_handler(c, cfg.containerd_config)},
		{"staging_timeout", duration_handler(c, cfg.staging_timeout)},
		{"metrics_dir", path_handler(c, cfg.metrics_dir)},
		{"ipc_sockets", bool_handler(c, cfg.ipc_sockets)},
		{"nvoptix", bool_handler(c, cfg.nvoptix)},
		{"expected_gpus", parsed_handler(c, cfg.expected_gpus, with_origin(c, cfg, "expected_gpus", parse_gpu_count),
						 "expected a number of GPUs from 1 to " + std::to_string(MAX_EXPECTED_GPUS) + " for key")},
		{"licensing",
		 [&](const YAML::Node &v, const std::string &key) -> Result<void> {
			 cfg.licensing.section_present = true;
			 return walk(c, v, key, licensing_keys);
		 }},
		{"refresh",
		 [&](const YAML::Node &v, const std::string &key) -> Result<void> { return walk(c, v, key, refresh_keys); }},
		{"consumers",
		 [&](const YAML::Node &v, const std::string &key) -> Result<void> { return walk(c, v, key, consumers_keys); }},
	};
}

}  // namespace

namespace {

// Kubernetes' label rules (apimachinery's IsQualifiedName and IsValidLabelValue): a name of at most
// 63 characters, alphanumeric at both ends, '-', '_' and '.' inside; a key may have a DNS subdomain
// prefix and '/'; a value may be empty.
bool label_name(std::string_view s)
{
	auto alnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
	if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back()))
		return false;
	for (char ch : s)
		if (!alnum(ch) && ch != '-' && ch != '_' && ch != '.')
			return false;
	return true;
}

bool label_key(std::string_view s)
{
	const auto slash = s.find('/');
	if (slash == std::string_view::npos)
		return label_name(s);
	const std::string_view prefix = s.substr(0, slash);
	if (prefix.empty() || prefix.size() > 253)
		return false;
	for (char ch : prefix)
		if (!(std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.'))
			return false;
	return label_name(s.substr(slash + 1));
}

}  // namespace

std::optional<ConsumerSelector> parse_consumer_selector(std::string_view text)
{
	ConsumerSelector sel;
	sel.text = std::string(text);
	if (text.ends_with(','))
		return std::nullopt;
	while (!text.empty()) {
		const auto comma = text.find(',');
		const std::string_view pair = text.substr(0, comma);
		text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
		const auto eq = pair.find('=');
		if (eq == std::string_view::npos)
			return std::nullopt;
		const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
		if (!label_key(key) || (!value.empty() && !label_name(value)))
			return std::nullopt;
		if (!sel.labels.emplace(key, value).second)
			return std::nullopt;
	}
	if (sel.labels.empty())
		return std::nullopt;
	return sel;
}

bool ConsumersConfig::in_namespace(const std::string &ns) const
{
	return namespaces.empty() || std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
}

std::vector<ConsumerSelector> ConsumersConfig::default_consumer_selectors()
{
	// The device plugin's chart (also on its GPU Feature Discovery and MPS daemon), its static manifest,
	// the GPU Operator's device plugin, GFD and dcgm-exporter, dcgm-exporter's chart, and the DRA
	// driver's kubelet plugin under both of its charts' names.
	std::vector<ConsumerSelector> out;
	for (const char *s : {"app.kubernetes.io/name=nvidia-device-plugin", "name=nvidia-device-plugin-ds", "app=nvidia-device-plugin-daemonset",
			      "app=gpu-feature-discovery", "app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter",
			      "nvidia-dra-driver-gpu-component=kubelet-plugin", "dra-driver-nvidia-gpu-component=kubelet-plugin"})
		out.push_back(*parse_consumer_selector(s));
	return out;
}

Result<Config> parse_config(std::string_view yaml_text, const std::string &display_path)
{
	Config cfg;
	std::map<std::string, int> lines;
	Ctx c{display_path, &lines};
	// Limits and aliases first (an admin's typo must not cost more than a line of error).
	if (auto r = parse_yaml_bounded(yaml_text, display_path, ParseLimits{8, 1000}); !r)
		return fail(usage_error(r.error().message));
	const std::map<std::string, Handler> licensing_keys = licensing_handlers(c, cfg.licensing);
	const std::map<std::string, Handler> refresh_keys = {
		{"settle_time", duration_handler(c, cfg.refresh.settle_time)},
		{"settle_limit", duration_handler(c, cfg.refresh.settle_limit)},
		{"interval", duration_handler(c, cfg.refresh.interval, Millis(10'000))},
	};

	const std::map<std::string, Handler> consumers_keys = consumers_handlers(c, cfg.consumers);
	const std::map<std::string, Handler> top_keys = top_handlers(c, cfg, licensing_keys, refresh_keys, consumers_keys);

	try {
		const YAML::Node root = YAML::Load(std::string(yaml_text));
		if (root.IsNull())
			return cfg;  // empty file: defaults
		if (auto r = walk(c, root, "", top_keys); !r)
			return fail(r.error());
	} catch (const YAML::Exception &e) {
		return fail(usage_error(display_path + ":" + std::to_string(e.mark.line + 1) + ": " + printable(e.msg)));
	}
	if (auto r = check_paths(c, cfg); !r)
		return fail(r.error());
	return cfg;
}

std::vector<std::string> apply_license_environment(LicensingConfig &lic, const EnvLookup &env)
{
	std::vector<std::string> warnings;
	if (auto v = env("VGPU_LICENSE_AUTO_RELOAD"); v && !v->empty())
		lic.auto_reload = *v == "true";
	if (auto v = env("VGPU_LICENSE_RELOAD_INTERVAL"); v && !v->empty()) {
		auto d = parse_duration(*v);
		if (!d || d->count() < 1000)
			warnings.push_back("Ignoring VGPU_LICENSE_RELOAD_INTERVAL='" + printable(*v) +
					   "': not a duration of at least 1s; using " + format_duration(lic.reload_interval));
		else
			lic.reload_interval = *d;
	}
	return warnings;
}

namespace {

// The variables of an EnvironmentFile= (systemd.exec(5)): KEY=VALUE lines, '#' and ';' comments,
// values in single or double quotes. Absent: empty.
Result<std::map<std::string, std::string>> read_environment_file(const std::string &path, const std::string &display)
{
	std::map<std::string, std::string> vars;
	auto text = fs::read_file_at(AT_FDCWD, path, display, 64 * 1024);
	if (!text) {
		if (text.error().errnum == ENOENT)
			return vars;
		return fail(text.error());
	}
	std::string_view rest = *text;
	while (!rest.empty()) {
		auto nl = rest.find('\n');
		std::string_view line = trim_blanks(rest.substr(0, nl));
		rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
		if (line.empty() || line.front() == '#' || line.front() == ';')
			continue;
		auto eq = line.find('=');
		if (eq == std::string_view::npos)
			continue;  // systemd ignores such a line too
		std::string_view key = trim_blanks(line.substr(0, eq)), value = trim_blanks(line.substr(eq + 1));
		if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
			value = value.substr(1, value.size() - 2);
		vars[std::string(key)] = std::string(value);
	}
	return vars;
}

}  // namespace

EnvLookup license_environment(const std::string &real_file, std::vector<std::string> &warnings)
{
	std::map<std::string, std::string> file;
	if (!real_file.empty()) {
		if (auto f = read_environment_file(real_file, LICENSE_ENVIRONMENT_FILE))
			file = std::move(*f);
		else
			warnings.push_back(f.error().message + ", ignoring it");
	}
	return [file = std::move(file)](const char *name) -> std::optional<std::string> {
		if (auto it = file.find(name); it != file.end())
			return it->second;
		if (const char *v = std::getenv(name))
			return std::string(v);
		return std::nullopt;
	};
}

Result<Config> load_config(const std::string &path, bool must_exist)
{
	auto text = fs::read_file(path, 1u << 20);
	if (!text) {
		if (text.error().errnum == ENOENT && !must_exist)
			return Config{};
		Error e = text.error();
		e.exit_code = EXIT_USAGE;
		return fail(e);
	}
	return parse_config(*text, path);
}

std::string configured_gpu_machine(const Config &cfg)
{
	if (cfg.enabled == Enabled::Yes)
		return "enabled: true in " + cfg.origin("enabled");
	if (cfg.expected_gpus)
		return "expected_gpus: " + std::to_string(*cfg.expected_gpus) + " in " + cfg.origin("expected_gpus");
	return {};
}

std::string nothing_bound_message(const Config &cfg)
{
	return "No staging mounts under " + cfg.staging + " and no /dev/nvidiactl, but " + configured_gpu_machine(cfg) +
	       ": the host has not bound its NVIDIA driver into this machine";
}

}  // namespace unbounded
