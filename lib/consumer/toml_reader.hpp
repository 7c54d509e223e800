// containerd's configuration files, read with toml++ (Debian's libtomlplusplus-dev) into a JSON value:
// tables are objects, dates and times their TOML text. Built with toml++'s features beyond TOML 1.0
// that containerd's Go TOML libraries (go-toml v1 in 1.7, v2 in 2.x) also take: an inline table over
// several lines; a UTF-8 byte-order mark is TOML's own. containerd refuses a file toml++ refuses (a
// table defined twice, a key set twice): the error names the file, line and column. The caller caps
// the bytes; depth and values are capped here like the other parsers (bounded_parse.hpp).
#pragma once

#include "bounded_parse.hpp"
#include "error.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace unbounded {

// The error number of a file past the limits here (not a file containerd refuses): PARSE_LIMIT_ERRNO,
// a control byte or a byte over 0x7f anywhere included.
Result<nlohmann::json> parse_toml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits = {});

}  // namespace unbounded
