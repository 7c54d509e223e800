// MACHINE.nspawn as `binds` edits it: the lines it owns are replaced, every other line (the operator's
// own binds, comments, other sections) is kept where it was. A line is ours by what it does, not by a
// marker: a bind onto /run/host-nvidia/<N>, the licensing mount, an NVIDIA or DRM device node or a
// daemon's socket directory; a credential named unbounded-nvidia.*; SystemCallFilter=bpf. So an
// operator's hand-written NVIDIA bind is taken over (and named by --check when it is not needed).
#pragma once

#include "host_binds.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded::host {

bool owned(const SettingLine &line);

// A Bind=/BindReadOnly= line: SOURCE[:DEST[:OPTIONS]], DEST defaulting to SOURCE.
struct BindSpec {
	std::string source;
	std::string dest;
	bool read_only = false;
	bool operator==(const BindSpec &) const = default;
};
std::optional<BindSpec> bind_spec(const SettingLine &line);
// Whether a mount at `dest` in a machine is one of ours (what owned() says of a bind line onto it).
bool owned_destination(std::string_view dest);

// `existing` with our lines replaced by `ours`, each at the end of the first section of its name
// (a section appended when the file has none).
std::string merge_settings(std::string_view existing, const std::vector<SettingLine> &ours);

struct SettingsDiff {
	std::vector<SettingLine> missing;      // needed, not in the file
	std::vector<SettingLine> superfluous;  // ours by what they do, in the file, not needed
};
SettingsDiff diff_settings(std::string_view existing, const std::vector<SettingLine> &ours);

// Every KEY=VALUE line of `text`, with its section, as systemd's parser reads them.
std::vector<SettingLine> setting_lines(std::string_view text);

}  // namespace unbounded::host
