// Parsers with limits. Specs in /etc/cdi and /var/run/cdi, the device plugin's JSON and the config
// may come from a writer we do not trust (a container can write /var/run/cdi): a 421-byte YAML alias
// bomb or a 64 MiB nested array must cost a clear error, not gigabytes and seconds. Every parse
// here caps nesting depth and node count; YAML aliases are refused (CDI specs and our config never
// need them, and expanding them is how a small file becomes a huge document). The byte cap is the
// caller's, applied when reading (fs::read_file's max_bytes).
#pragma once

#include "error.hpp"

#include <cerrno>
#include <cstddef>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace unbounded {

struct ParseLimits {
	unsigned max_depth = 32;        // a CDI spec nests 5 levels deep, the config 3
	std::size_t max_nodes = 50000;  // nvidia-ctk's spec for 8 GPUs with MIG holds a few thousand
	// Explicit YAML tags ("!!str x") read as if absent; false: refused as past the limits, for a file
	// whose reader has its own rules for them (go-yaml decodes "!!binary" as base64).
	bool read_tags = true;
};

// The error number of a parse refused by a limit (depth, nodes, an alias, a key's length), not by
// the syntax: the document may well be valid, only not read here.
inline constexpr int PARSE_LIMIT_ERRNO = E2BIG;

// Bytes read of a spec file at most: 2 MiB, ten times the largest spec nvidia-ctk writes.
inline constexpr std::size_t MAX_SPEC_BYTES = 2u << 20;

// YAML (JSON is YAML) to a JSON value in one pass over the parser's events, never building a
// YAML::Node tree: quoted scalars stay strings, plain ones become integers or booleans where they
// look like one, null is null. Errors name the file and line: "spec.yaml:3: ...".
Result<nlohmann::ordered_json> parse_yaml_bounded(std::string_view text, const std::string &display,
						  const ParseLimits &limits = {});

// Checks a JSON text against the limits without building anything (a SAX pass); callers then
// parse it with nlohmann as usual. Malformed JSON is reported here too: "<display> is not valid
// JSON (...)" or "<display> is refused: nested deeper than 32 levels" (PARSE_LIMIT_ERRNO).
Result<void> check_json_bounded(std::string_view text, const std::string &display, const ParseLimits &limits = {});

// Text safe to print, log and put into JSON: bytes that are not printable ASCII or part of valid
// UTF-8 become \xNN, control characters included. File names from staging or specs go through it.
std::string printable(std::string_view s);
// Whether printable(s) == s: every byte it escapes grows to four.
inline bool is_printable(std::string_view s) { return printable(s).size() == s.size(); }

}  // namespace unbounded
