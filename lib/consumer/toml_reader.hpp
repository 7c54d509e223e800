// TOML read with toml++ (Debian's libtomlplusplus-dev) into a JSON value: containerd's answer (its
// config dump) and the imports of its files, CRI-O's and nvidia-container-runtime's configuration.
// Tables are objects, dates and times their TOML text. Built with toml++'s features beyond TOML 1.0
// that the Go TOML libraries also take (an inline table over several lines); whether containerd
// itself takes a file is containerd's answer, never this reader's. Errors name the file, line and
// column. The caller caps the bytes; depth and values are capped here like the other parsers
// (bounded_parse.hpp).
#pragma once

#include "bounded_parse.hpp"
#include "error.hpp"

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace unbounded {

// The error number of a file past the limits here (not a file containerd refuses): PARSE_LIMIT_ERRNO,
// a control byte or a byte over 0x7f anywhere included.
Result<nlohmann::json> parse_toml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits = {});

// The value at the path of `keys` in a parsed file, each step a key of a table; null when a step is
// missing or not a table.
const nlohmann::json *table_at(const nlohmann::json &doc, std::initializer_list<const char *> keys);

}  // namespace unbounded
