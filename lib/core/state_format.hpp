// The format of the state files this release writes (status.json, held-back.json, the license
// reloader's records): each carries it, so that a release rolled back to never misreads what a newer
// one wrote. A file without it is an older release's, read as format 1; a newer format is refused,
// saying so, and treated as absent.
#pragma once

#include <optional>
#include <string>

namespace unbounded {

inline constexpr int STATE_FORMAT = 1;

// Why a file of format `found` is not read ("PATH was written by a newer release (state format 2; this
// release reads 1)"), or nullopt when it is read.
inline std::optional<std::string> newer_state_format(long long found, const std::string &display)
{
	if (found <= STATE_FORMAT)
		return std::nullopt;
	return display + " was written by a newer release (state format " + std::to_string(found) + "; this release reads " +
	       std::to_string(STATE_FORMAT) + ")";
}

}  // namespace unbounded
