#include "credentials.hpp"

#include "bounded_parse.hpp"
#include "chase.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <fcntl.h>

namespace unbounded {

namespace {

// A directory under the root, links followed but never out of it (systemd 252 makes @system a link to
// nspawn's /run/host/credentials). Absent or not visible: an invalid fd.
Result<UniqueFd> open_dir_in_root(const std::string &root, const char *path)
{
	auto r = fs::open_dir(root.empty() ? "/" : root);
	if (!r)
		return fail(r.error());
	// Not there, or not visible: a sandboxed unit's mount namespace may hide /run/credentials
	// (EACCES, seen in the system tier on systemd 252), where only what the unit imported is seen.
	auto c = chase(r->get(), path, ChaseHow{Chase::InRoot | Chase::OpenLast, nullptr, {}});
	if (!c)
		return UniqueFd();
	return UniqueFd(::openat(c->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

struct Source {
	UniqueFd fd;
	std::string display;
	const char *kind;  // how origins name it: "credential" or "host setting"
};

// Where the host's settings may be, first found first: the directory unbounded-nvidia-host binds, a
// unit's own credentials ($CREDENTIALS_DIRECTORY: what its LoadCredential= copied of the system's, or an
// operator's ImportCredential=), then the system credentials. The bound directory first, so that the
// generator (no unit credentials), setup and verify all take the same value; a unit that was given
// some other credential must still see the host's.
Result<std::vector<Source>> open_sources(const std::string &root, const char *env_dir)
{
	std::vector<Source> sources;
	auto settings = open_dir_in_root(root, HOST_SETTINGS_DIR);
	if (!settings)
		return fail(settings.error());
	if (settings->valid())
		sources.push_back({std::move(*settings), HOST_SETTINGS_DIR, "host setting"});
	if (env_dir && env_dir[0] == '/')
		if (auto d = fs::open_dir(env_dir))
			sources.push_back({std::move(*d), env_dir, "credential"});
	auto system = open_dir_in_root(root, SYSTEM_CREDENTIALS_DIR);
	if (!system)
		return fail(system.error());
	if (system->valid())
		sources.push_back({std::move(*system), SYSTEM_CREDENTIALS_DIR, "credential"});
	return sources;
}

// unbounded-nvidia.KEY from the first source that has it: false when none does.
Result<bool> read_credential(const std::vector<Source> &sources, const char *key, std::string &value, std::string &origin)
{
	const std::string name = std::string("unbounded-nvidia.") + key;
	for (const auto &s : sources) {
		auto text = fs::read_file_at(s.fd.get(), name, s.display + "/" + name, MAX_CREDENTIAL_BYTES);
		if (!text && text.error().errnum == ENOENT)
			continue;
		origin = std::string(s.kind) + " " + name + " (" + s.display + ")";
		if (!text)
			return fail(usage_error(origin + ": " + text.error().message));
		value = trim_blanks(*text);
		return true;
	}
	return false;
}

// Applies the settings found to `cfg` (recording each one's origin). One whose value is not understood
// is a usage error naming it, as a bad line of the file is.
Result<void> apply_credentials(Config &cfg, const std::vector<Source> &sources)
{
	const auto read = [&](const char *key, std::string &value, std::string &origin) { return read_credential(sources, key, value, origin); };
	std::string value, origin;
	const auto bad = [&](const std::string &what) { return fail(usage_error(origin + ": '" + printable(value) + "' is not " + what)); };
	if (auto r = read("enabled", value, origin); !r)
		return fail(r.error());
	else if (*r) {
		const auto e = parse_enabled(value);
		if (!e)
			return bad("auto, true or false");
		cfg.enabled = *e;
		cfg.origins["enabled"] = origin;
	}
	if (auto r = read("gpus", value, origin); !r)
		return fail(r.error());
	else if (*r) {
		std::vector<std::string> gpus;
		for (std::size_t pos = 0; pos <= value.size();) {
			auto comma = value.find(',', pos);
			if (comma == std::string::npos)
				comma = value.size();
			const std::string g(trim_blanks(std::string_view(value).substr(pos, comma - pos)));
			if (!g.empty())
				gpus.push_back(g);
			pos = comma + 1;
		}
		if (gpus.empty() || gpus.size() > MAX_EXPECTED_GPUS ||
		    std::any_of(gpus.begin(), gpus.end(), [](const std::string &g) {
			    return g.size() > 64 || g.find_first_not_of("0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-:._") != std::string::npos;
		    }))
			return bad("a list of GPU UUIDs or PCI addresses");
		cfg.assigned_gpus = std::move(gpus);
		cfg.origins["gpus"] = origin;
		cfg.expected_gpus = static_cast<unsigned>(cfg.assigned_gpus.size());
		cfg.origins["expected_gpus"] = origin;
	}
	if (auto r = read("expected_gpus", value, origin); !r)
		return fail(r.error());
	else if (*r) {
		const auto n = parse_gpu_count(value);
		if (!n)
			return bad("a number of GPUs from 1 to " + std::to_string(MAX_EXPECTED_GPUS));
		cfg.expected_gpus = *n;
		cfg.origins["expected_gpus"] = origin;
	}
	return {};
}

// The host's kill switch alone: where enabled=false was set, or nullopt. Read on its own so that no
// error in the image's file or in another setting can override it.
std::optional<std::string> host_switched_off(const std::vector<Source> &sources)
{
	std::string value, origin;
	if (!read_credential(sources, "enabled", value, origin).value_or(false))
		return std::nullopt;
	const auto e = parse_enabled(value);
	return e && *e == Enabled::No ? std::optional(origin) : std::nullopt;
}

}  // namespace

Result<Config> load_machine_config(const std::string &config_path, bool must_exist, const std::string &root, const char *env_dir,
				   std::vector<std::string> &warnings)
{
	auto sources = open_sources(root, env_dir);
	auto cfg = load_config(config_path, must_exist);
	if (cfg && !sources)
		cfg = fail(sources.error());
	if (cfg)
		if (auto r = apply_credentials(*cfg, *sources); !r)
			cfg = fail(r.error());
	const auto off = sources ? host_switched_off(*sources) : std::nullopt;
	if (!off)
		return cfg;
	if (!cfg) {
		warnings.push_back(cfg.error().message + "; ignored, the host switched this machine off");
		cfg = Config{};
	}
	cfg->enabled = Enabled::No;
	cfg->origins["enabled"] = *off;
	return cfg;
}

}  // namespace unbounded
