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

// How plain (unquoted) YAML scalars become JSON values.
enum class YamlScalars {
	Ours,       // our config and specs: digits are integers, true/false booleans, the rest text
	GoStrings,  // as the CDI library reads a spec (go-yaml v2's YAML 1.1 resolution, then
		    // sigs.k8s.io/yaml's conversion for a Go string field): 0x0, 00, +0 and 0.0 are "0",
		    // yes and on are "true", ~ is null; a duplicate key, a merge key (<<) and any document
		    // after the first as go-yaml treats them (an error, refused, ignored)
};

struct ParseLimits {
	unsigned max_depth = 32;        // a CDI spec nests 5 levels deep, the config 3
	std::size_t max_nodes = 50000;  // nvidia-ctk's spec for 8 GPUs with MIG holds a few thousand
	YamlScalars scalars = YamlScalars::Ours;
};

// The error number of a parse refused by a limit (depth, nodes, an alias, a key's length), not by
// the syntax: the document may well be valid, only not read here.
inline constexpr int PARSE_LIMIT_ERRNO = E2BIG;

// A plain YAML scalar as the CDI library's Go decoding stores it in a string field, nullopt for null
// (YamlScalars::GoStrings).
std::optional<std::string> go_yaml_plain_string(std::string_view plain);

// Bytes read of a spec file at most: 2 MiB, ten times the largest spec nvidia-ctk writes.
inline constexpr std::size_t MAX_SPEC_BYTES = 2u << 20;

// YAML (JSON is YAML) to a JSON value in one pass over the parser's events, never building a
// YAML::Node tree: quoted scalars stay strings, plain ones become integers or booleans where they
// look like one, null is null. Errors name the file and line: "spec.yaml:3: ...".
Result<nlohmann::ordered_json> parse_yaml_bounded(std::string_view text, const std::string &display,
						  const ParseLimits &limits = {});

// Checks a JSON text against the limits without building anything (a SAX pass); callers then
// parse it with nlohmann as usual. Malformed JSON is reported here too: "<display> is not valid
// JSON (...)" or "<display> is refused: nested deeper than 32 levels".
Result<void> check_json_bounded(std::string_view text, const std::string &display, const ParseLimits &limits = {});

// Text safe to print, log and put into JSON: bytes that are not printable ASCII or part of valid
// UTF-8 become \xNN, control characters included. File names from staging or specs go through it.
std::string printable(std::string_view s);
// Whether printable(s) == s.
bool is_printable(std::string_view s);

}  // namespace unbounded
