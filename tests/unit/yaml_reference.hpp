// The definition of the YAML our writers produce (yaml_emit.cpp, the CDI spec's SpecWriter): a
// document through yaml-cpp's Emitter with an indent of 2, strings a reader could take for a number
// (digits, a MIG device name "1:0") double-quoted.
#pragma once

#include "format.hpp"

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <yaml-cpp/yaml.h>

namespace yaml_reference {

inline bool looks_numeric(const std::string &s)
{
	return unbounded::all_digits(s) || (!s.empty() && std::isdigit(static_cast<unsigned char>(s.front())) && s.find(':') != std::string::npos);
}

inline void emit_string(YAML::Emitter &e, const std::string &s)
{
	if (looks_numeric(s))
		e << YAML::DoubleQuoted << s;
	else
		e << s;
}

inline void emit(YAML::Emitter &e, const nlohmann::ordered_json &v)
{
	if (v.is_object()) {
		e << YAML::BeginMap;
		for (auto it = v.begin(); it != v.end(); ++it) {
			e << YAML::Key << it.key() << YAML::Value;
			emit(e, it.value());
		}
		e << YAML::EndMap;
	} else if (v.is_array()) {
		e << YAML::BeginSeq;
		for (const auto &i : v)
			emit(e, i);
		e << YAML::EndSeq;
	} else if (v.is_string()) {
		emit_string(e, v.get_ref<const std::string &>());
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

inline std::string block_yaml(const nlohmann::ordered_json &doc)
{
	YAML::Emitter e;
	e.SetIndent(2);
	e << YAML::BeginDoc;
	emit(e, doc);
	return std::string(e.c_str()) + "\n";
}

// One string scalar as the document writer writes it.
inline std::string scalar(const std::string &s)
{
	YAML::Emitter e;
	emit_string(e, s);
	return e.c_str();
}

}  // namespace yaml_reference
