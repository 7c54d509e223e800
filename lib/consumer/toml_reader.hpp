// A reader for the TOML that containerd's configuration files are written in, to a JSON value. It
// knows what TOML 1.0 has (tables and arrays of tables with dotted and quoted keys, dotted keys,
// basic and literal strings, multi-line ones, integers, floats, booleans, dates as strings, arrays,
// inline tables) and no more than `verify` needs: values are never interpreted beyond their type.
// containerd's files are root's, but broken ones exist: every error names the file and the line, and
// depth and size are capped like the other parsers (bounded_parse.hpp).
#pragma once

#include "bounded_parse.hpp"
#include "error.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace unbounded {

Result<nlohmann::json> parse_toml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits = {});

}  // namespace unbounded
