#include "credentials.hpp"

#include "bounded_parse.hpp"
#include "chase.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>
#include <fcntl.h>

namespace unbounded {

namespace {

constexpr std::string_view WHITESPACE = " \t\r\n";

std::string trimmed(std::string s)
{
	const auto b = s.find_first_not_of(WHITESPACE);
	if (b == std::string::npos)
		return {};
	return s.substr(b, s.find_last_not_of(WHITESPACE) - b + 1);
}

// The credentials directory, open: $CREDENTIALS_DIRECTORY as it is (the service manager made it), or
// the system credentials under the root, links followed but never out of it.
Result<UniqueFd> open_credentials(const std::string &root, const char *env_dir, std::string &display)
{
	if (env_dir && env_dir[0] == '/') {
		display = env_dir;
		return fs::open_dir(env_dir);
	}
	display = SYSTEM_CREDENTIALS_DIR;
	auto r = fs::open_dir(root.empty() ? "/" : root);
	if (!r)
		return fail(r.error());
	auto c = chase(r->get(), SYSTEM_CREDENTIALS_DIR, ChaseHow{Chase::InRoot | Chase::OpenLast, nullptr, {}});
	if (!c)
		return fail(c.error().error);
	UniqueFd fd(::openat(c->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!fd)
		return fail(last_errno_error("Failed to open " + display));
	return fd;
}

}  // namespace

Result<void> apply_credentials(Config &cfg, const std::string &root, const char *env_dir)
{
	std::string dir_display;
	auto dir = open_credentials(root, env_dir, dir_display);
	if (!dir)
		return {};  // none passed: the file and the defaults stand
	const auto read = [&](const char *key, std::string &value, std::string &origin) -> Result<bool> {
		const std::string name = std::string("unbounded-nvidia.") + key;
		auto text = fs::read_file_at(dir->get(), name, dir_display + "/" + name, MAX_CREDENTIAL_BYTES);
		if (!text)
			return text.error().errnum == ENOENT ? Result<bool>(false) : fail(usage_error("credential " + text.error().message));
		value = trimmed(*text);
		origin = "credential " + name + " (" + dir_display + ")";
		return true;
	};
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
