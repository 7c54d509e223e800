// Block-style YAML for a JSON-shaped document, byte-identical to what yaml-cpp's Emitter writes with
// an indent of 2 (a unit test holds the two equal). yaml-cpp decides for every scalar whether it may be
// written plain by running a regular-expression engine, about 28,000 instructions a scalar and 80 % of
// generating a CDI spec; here scalars drawn from the characters of paths, names and options are
// checked directly and anything else is handed to yaml-cpp, which quotes and escapes it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace unbounded {

// Strings made only of digits are double-quoted, so "0" stays a string for every YAML reader.
std::string emit_block_yaml(const nlohmann::ordered_json &doc);

// One string scalar exactly as emit_block_yaml writes it, for writers that stream a document of a
// known shape (the CDI spec) instead of building it.
void append_yaml_string(std::string &out, const std::string &s);

// The same through yaml-cpp's Emitter, for tests and as the definition of the format.
std::string emit_block_yaml_reference(const nlohmann::ordered_json &doc);

}  // namespace unbounded
