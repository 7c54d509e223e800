#include "yaml_emit.hpp"

#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <strings.h>
#include <yaml-cpp/yaml.h>

namespace unbounded {

using nlohmann::ordered_json;

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

// Appends a string scalar: plain where that is sure to read back as the same string, else as
// yaml-cpp writes it.
void append_string(std::string &out, const std::string &s)
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

void append_scalar(std::string &out, const ordered_json &v)
{
	if (v.is_string())
		append_string(out, v.get_ref<const std::string &>());
	else if (v.is_boolean())
		out += v.get<bool>() ? "true" : "false";
	else if (v.is_null())
		out += '~';
	else if (v.is_number_unsigned())
		out += std::to_string(v.get<std::uint64_t>());
	else if (v.is_number_integer())
		out += std::to_string(v.get<std::int64_t>());
	else
		out += v.dump();  // floats
}

void emit(std::string &out, const ordered_json &v, std::size_t indent);

void emit_map_body(std::string &out, const ordered_json &m, std::size_t indent, bool first_inline)
{
	bool first = true;
	for (auto it = m.begin(); it != m.end(); ++it) {
		if (!(first && first_inline))
			out.append(indent, ' ');
		first = false;
		append_string(out, it.key());
		out += ':';
		const ordered_json &val = it.value();
		if (val.is_object() && !val.empty()) {
			out += '\n';
			emit_map_body(out, val, indent + 2, false);
		} else if (val.is_array() && !val.empty()) {
			out += '\n';
			emit(out, val, indent + 2);
		} else if (val.is_object()) {
			out += " {}\n";
		} else if (val.is_array()) {
			out += " []\n";
		} else {
			out += ' ';
			append_scalar(out, val);
			out += '\n';
		}
	}
}

void emit(std::string &out, const ordered_json &v, std::size_t indent)
{
	if (v.is_object()) {
		emit_map_body(out, v, indent, false);
		return;
	}
	for (const auto &item : v) {
		out.append(indent, ' ');
		out += "- ";
		if (item.is_object() && !item.empty())
			emit_map_body(out, item, indent + 2, true);
		else if (item.is_array() && !item.empty()) {
			out += '\n';
			emit(out, item, indent + 2);
		} else {
			append_scalar(out, item);
			out += '\n';
		}
	}
}

void emit_reference(YAML::Emitter &e, const ordered_json &v)
{
	if (v.is_object()) {
		e << YAML::BeginMap;
		for (auto it = v.begin(); it != v.end(); ++it) {
			e << YAML::Key << it.key() << YAML::Value;
			emit_reference(e, it.value());
		}
		e << YAML::EndMap;
	} else if (v.is_array()) {
		e << YAML::BeginSeq;
		for (const auto &i : v)
			emit_reference(e, i);
		e << YAML::EndSeq;
	} else if (v.is_string()) {
		const std::string &s = v.get_ref<const std::string &>();
		if (looks_numeric(s))
			e << YAML::DoubleQuoted << s;
		else
			e << s;
	} else if (v.is_boolean()) {
		e << v.get<bool>();
	} else if (v.is_number_unsigned()) {
		e << v.get<std::uint64_t>();
	} else if (v.is_number_integer()) {
		e << v.get<std::int64_t>();
	} else if (v.is_null()) {
		e << YAML::Null;
	} else {
		e << v.dump();
	}
}

// The shapes the fast path writes: nested mappings and sequences of scalars or of non-empty
// mappings, never empty containers or a sequence directly inside a sequence.
bool fast_path_shape(const ordered_json &v, bool in_sequence)
{
	if (v.is_object()) {
		if (v.empty())
			return false;
		for (auto it = v.begin(); it != v.end(); ++it)
			if (!fast_path_shape(it.value(), false))
				return false;
		return true;
	}
	if (v.is_array()) {
		if (v.empty() || in_sequence)
			return false;
		return std::all_of(v.begin(), v.end(), [](const ordered_json &i) { return fast_path_shape(i, true); });
	}
	return true;
}

}  // namespace

void append_yaml_string(std::string &out, const std::string &s) { append_string(out, s); }

std::string emit_block_yaml(const ordered_json &doc)
{
	if (!fast_path_shape(doc, false))
		return emit_block_yaml_reference(doc);
	std::string out = "---\n";
	out.reserve(16 * 1024);
	emit(out, doc, 0);
	return out;
}

std::string emit_block_yaml_reference(const ordered_json &doc)
{
	YAML::Emitter e;
	e.SetIndent(2);
	e << YAML::BeginDoc;
	emit_reference(e, doc);
	return std::string(e.c_str()) + "\n";
}

}  // namespace unbounded
