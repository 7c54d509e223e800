#include "cdi_spec.hpp"

#include "format.hpp"

#include <cctype>
#include <cstring>
#include <strings.h>
#include <yaml-cpp/yaml.h>

namespace unbounded {

namespace {

// Plain for sure: starts with a letter, a digit or '/', and holds only characters that can never
// start a YAML indicator, a comment or a key separator in the middle of a block scalar.
bool ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool surely_plain(const std::string &s)
{
	// A relative link target ("../card1::/dev/dri/by-path/..."): '.' begins no YAML indicator, and
	// "../" is no float (".inf", ".nan"). yaml-cpp writes these plain too, at 400,000 instructions a
	// string (8 GPUs' by-path links were half of generate-cdi).
	const bool relative = s.starts_with("../") || s.starts_with("./");
	// A long option ("--link", "--host-driver-version=..."): '-' followed by no space is plain. Every
	// hook argument list has dozens.
	const bool option = s.size() > 2 && s[0] == '-' && s[1] == '-' && ascii_alnum(s[2]);
	if (s.empty() || !(ascii_alnum(s.front()) || s.front() == '/' || relative || option))
		return false;
	// Words some YAML reader takes for null or a boolean: yaml-cpp decides how to write them.
	if (s.size() <= 5 && std::strchr("nNtTfFyYoO", s.front())) {
		static const char *words[] = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"};
		for (const char *w : words)
			if (::strcasecmp(s.c_str(), w) == 0)
				return false;
	}
	for (std::size_t i = 0; i < s.size(); i++) {
		const char c = s[i];
		if (ascii_alnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '=' || c == '+')
			continue;
		if (c == ':' && i + 1 < s.size() && s[i + 1] != ' ')  // "a::b" is plain, "a: b" is not
			continue;
		return false;
	}
	return true;
}

// Strings a reader could take for a number: digits, and a MIG device name "1:0", which a YAML 1.1
// reader (PyYAML, go-yaml v2) takes for the base-60 integer 60. They are written double-quoted.
bool looks_numeric(const std::string &s)
{
	return all_digits(s) || (!s.empty() && std::isdigit(static_cast<unsigned char>(s.front())) && s.find(':') != std::string::npos);
}

}  // namespace

// Appends a string scalar: plain where that is sure to read back as the same string, else as
// yaml-cpp writes it.
void append_yaml_string(std::string &out, const std::string &s)
{
	if (looks_numeric(s)) {
		if (surely_plain(s)) {  // nothing to escape
			out += '"';
			out += s;
			out += '"';
			return;
		}
		YAML::Emitter e;
		e << YAML::DoubleQuoted << s;
		out += e.c_str();
		return;
	}
	if (surely_plain(s)) {
		out += s;
		return;
	}
	YAML::Emitter e;
	e << s;
	out += e.c_str();
}

}  // namespace unbounded
