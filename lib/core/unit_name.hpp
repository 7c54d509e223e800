// systemd's rule for a service unit's name (unit_name_is_valid()), for names that go into unit text
// or a drop-in's directory name: NAME.service of letters, digits and ":-_.\@", at most 255 characters,
// a template's '@' at most once and not first. Anything else (a newline, a '/', a blank) is refused:
// a name is never escaped into a unit file.
#pragma once

#include <algorithm>
#include <string_view>

namespace unbounded {

inline bool valid_service_name(std::string_view unit)
{
	constexpr std::string_view SUFFIX = ".service";
	if (unit.size() > 255 || !unit.ends_with(SUFFIX) || unit.size() == SUFFIX.size())
		return false;
	const auto prefix = unit.substr(0, unit.size() - SUFFIX.size());
	if (prefix.front() == '@' || std::count(prefix.begin(), prefix.end(), '@') > 1)
		return false;
	return std::all_of(prefix.begin(), prefix.end(), [](char c) {
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' || c == '-' || c == '_' ||
		       c == '.' || c == '\\' || c == '@';
	});
}

}  // namespace unbounded
