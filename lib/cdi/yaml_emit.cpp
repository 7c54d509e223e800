#include "yaml_emit.hpp"

#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <yaml-cpp/yaml.h>

namespace unbounded {

using nlohmann::ordered_json;

namespace {

// Plain for sure: starts with a letter, a digit or '/', and holds only characters that can never
// start a YAML indicator, a comment or a key separator in the middle of a block scalar.
bool surely_plain(const std::string &s)
{
	if (s.empty() || !(std::isalnum(static_cast<unsigned char>(s.front())) || s.front() == '/'))
		return false;
	// Words some YAML reader takes for null or a boolean: yaml-cpp decides how to write them.
	static const char *words[] = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"};
	std::string lower(s.size(), '\0');
	std::transform(s.begin(), s.end(), lower.begin(), [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
	for (const char *w : words)
		if (lower == w)
			return false;
	for (std::size_t i = 0; i < s.size(); i++) {
		const char c = s[i];
		if (std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' || c == '-' || c == '=' || c == '+')
			continue;
		if (c == ':' && i + 1 < s.size() && s[i + 1] != ' ')  // "a::b" is plain, "a: b" is not
			continue;
		return false;
	}
	return true;
}

std::string scalar(const ordered_json &v)
{
	if (v.is_string()) {
		const std::string &s = v.get_ref<const std::string &>();
		if (all_digits(s))
			return "\"" + s + "\"";
		if (surely_plain(s))
			return s;
		YAML::Emitter e;
		e << s;
		return e.c_str();
	}
	if (v.is_boolean())
		return v.get<bool>() ? "true" : "false";
	if (v.is_null())
		return "~";
	return v.dump();  // numbers
}

void emit(std::string &out, const ordered_json &v, std::size_t indent);

void emit_map_body(std::string &out, const ordered_json &m, std::size_t indent, bool first_inline)
{
	bool first = true;
	for (auto it = m.begin(); it != m.end(); ++it) {
		if (!(first && first_inline))
			out.append(indent, ' ');
		first = false;
		out += scalar(it.key());
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
			out += scalar(val);
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
			out += scalar(item);
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
		if (all_digits(s))
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
