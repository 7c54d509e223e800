// The licensing files and the record format of one set of their contents.
#include "license_reload.hpp"

#include "state_format.hpp"

#include <algorithm>
#include <charconv>

namespace unbounded {

namespace {

// The record's first line names its format (state_format.hpp).
constexpr std::string_view STATE_PREFIX = "UNBOUNDED-LICENSE-STATE ";
const std::string STATE_MAGIC = std::string(STATE_PREFIX) + std::to_string(STATE_FORMAT) + "\n";

}  // namespace

std::vector<LicenseItem> license_items(const LicensingConfig &lic)
{
	return {
		{"gridd.conf", lic.gridd_conf_target, 0644, lic.legacy_gridd_conf},
		{"client_configuration_token.tok", lic.client_token_target, 0600, lic.legacy_client_token},
	};
}

std::string LicenseSet::serialize() const
{
	std::string s = STATE_MAGIC;
	for (const auto &[name, content] : files) {
		s += name + " " + std::to_string(content.size()) + "\n";
		s += content;
		s += "\n";
	}
	return s;
}

std::optional<LicenseSet> LicenseSet::parse(std::string_view text)
{
	if (!text.starts_with(STATE_MAGIC))
		return std::nullopt;
	text.remove_prefix(STATE_MAGIC.size());
	LicenseSet set;
	while (!text.empty()) {
		auto nl = text.find('\n');
		if (nl == std::string_view::npos)
			return std::nullopt;
		std::string_view header = text.substr(0, nl);
		auto sp = header.rfind(' ');
		if (sp == std::string_view::npos || sp == 0)
			return std::nullopt;
		std::size_t size = 0;
		auto [p, ec] = std::from_chars(header.data() + sp + 1, header.data() + header.size(), size);
		if (ec != std::errc() || p != header.data() + header.size())
			return std::nullopt;
		text.remove_prefix(nl + 1);
		if (size >= text.size() || text[size] != '\n')  // not size + 1 > ...: 2^64 - 1 would wrap
			return std::nullopt;
		set.files.emplace(std::string(header.substr(0, sp)), std::string(text.substr(0, size)));
		text.remove_prefix(size + 1);
	}
	return set;
}

std::optional<std::string> LicenseSet::newer_format(std::string_view text, const std::string &display)
{
	if (!text.starts_with(STATE_PREFIX))
		return std::nullopt;
	text.remove_prefix(STATE_PREFIX.size());
	long long found = 0;
	auto [p, ec] = std::from_chars(text.data(), text.data() + std::min<std::size_t>(text.size(), 20), found);
	if (ec != std::errc() || p == text.data())
		return std::nullopt;
	return newer_state_format(found, display);
}

std::string LicenseSet::names() const
{
	std::string s;
	for (const auto &[name, _] : files)
		s += (s.empty() ? "" : ", ") + name;
	return s.empty() ? "(none)" : s;
}

}  // namespace unbounded
