#include "credentials.hpp"

#include "bounded_parse.hpp"
#include "chase.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <fcntl.h>

namespace unbounded {

namespace {

std::string trimmed(const std::string &s) { return std::string(trim_blanks(s)); }

// The system credentials under the root, links followed but never out of it (systemd 252 makes
// @system a link to nspawn's /run/host/credentials). Absent or not visible: an invalid fd.
Result<UniqueFd> open_system_credentials(const std::string &root)
{
	auto r = fs::open_dir(root.empty() ? "/" : root);
	if (!r)
		return fail(r.error());
	// Not there, or not visible: a sandboxed unit's mount namespace may hide /run/credentials
	// (EACCES, seen in the system tier on systemd 252), where only what the unit imported is seen.
	auto c = chase(r->get(), SYSTEM_CREDENTIALS_DIR, ChaseHow{Chase::InRoot | Chase::OpenLast, nullptr, {}});
	if (!c)
		return UniqueFd();
	return UniqueFd(::openat(c->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

struct CredentialDirs {
	int unit;  // $CREDENTIALS_DIRECTORY's, or -1
	std::string unit_display;
	int system;  // /run/credentials/@system's, or -1
};

// unbounded-nvidia.KEY from the first directory that has it: false when none does.
Result<bool> read_credential(const CredentialDirs &dirs, const char *key, std::string &value, std::string &origin)
{
	const std::string name = std::string("unbounded-nvidia.") + key;
	for (const auto &[fd, display] :
	     {std::pair<int, std::string>{dirs.unit, dirs.unit_display}, std::pair<int, std::string>{dirs.system, SYSTEM_CREDENTIALS_DIR}}) {
		if (fd < 0)
			continue;
		auto text = fs::read_file_at(fd, name, display + "/" + name, MAX_CREDENTIAL_BYTES);
		if (!text && text.error().errnum == ENOENT)
			continue;
		origin = "credential " + name + " (" + display + ")";
		if (!text)
			return fail(usage_error(origin + ": " + text.error().message));
		value = trimmed(*text);
		return true;
	}
	return false;
}

}  // namespace

Result<void> apply_credentials(Config &cfg, const std::string &root, const char *env_dir)
{
	// A unit's own credentials first ($CREDENTIALS_DIRECTORY: an operator's LoadCredential= or
	// ImportCredential=), then, for each one not there, the system's: a unit that was given some other
	// credential must still see the host's.
	UniqueFd unit_dir;
	if (env_dir && env_dir[0] == '/')
		if (auto d = fs::open_dir(env_dir))
			unit_dir = std::move(*d);
	auto system_dir = open_system_credentials(root);
	if (!system_dir)
		return fail(system_dir.error());
	const CredentialDirs dirs{unit_dir.get(), env_dir ? env_dir : "", system_dir->get()};
	const auto read = [&](const char *key, std::string &value, std::string &origin) { return read_credential(dirs, key, value, origin); };
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
			const std::string g = trimmed(value.substr(pos, comma - pos));
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

}  // namespace unbounded
