// What verify carries from the last setup or refresh: its status.json (setup/report.hpp writes it,
// in our run directory), read back. Only a file nobody else could have written is read (the caller's
// fs::check_trusted), and it is still parsed as untrusted text: bounded, every string printable.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

// The most warnings carried; a status.json with more is not ours or not sane.
inline constexpr std::size_t MAX_LAST_RUN_WARNINGS = 100;

struct LastRun {
	std::string command, outcome;       // "" when absent or not strings
	std::vector<std::string> warnings;  // printable(), at most MAX_LAST_RUN_WARNINGS
};

// nullopt when the text is not a JSON object within the limits (8 levels, 100,000 values).
std::optional<LastRun> parse_last_run(std::string_view text, const std::string &display);

}  // namespace unbounded
