// The licensing files the reloader manages, and one complete set of their contents as it records
// them in its state directory (a length-prefixed text format, parsed strictly).
#pragma once

#include "config.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

// The licensing files: the name in the source directory, the installed path, its mode.
struct LicenseItem {
	std::string name;    // "gridd.conf"
	std::string target;  // "/etc/nvidia/gridd.conf"
	unsigned mode;       // 0644, 0600 for the token
	std::string legacy;  // per-file fallback source
};
std::vector<LicenseItem> license_items(const LicensingConfig &lic);

// One complete set of licensing file contents, by item name.
struct LicenseSet {
	std::map<std::string, std::string> files;
	bool operator==(const LicenseSet &) const = default;
	bool empty() const { return files.empty(); }
	std::string serialize() const;
	// Why `text` is not read when a newer release wrote it (state_format.hpp), else nullopt.
	static std::optional<std::string> newer_format(std::string_view text, const std::string &display);
	static std::optional<LicenseSet> parse(std::string_view text);
	std::string names() const;  // "gridd.conf, client_configuration_token.tok" for log lines
};

}  // namespace unbounded
