// The reloader's records in its state directory (LicenseSet::serialize), by file name. Internal to
// the license reloader's sources.
#pragma once

namespace unbounded::reload_records {

inline constexpr const char *APPLIED = "applied.state";  // what is installed and known to work (last known good)
inline constexpr const char *FAILED = "failed.state";    // a set after which nvidia-gridd did not stay up
// Installed while nvidia-gridd restarts, until the restart is judged: left behind by a run that was
// killed (or stopped by a shutdown) in the middle, so the next run knows the installed files are unverified.
inline constexpr const char *RESTARTING = "restarting.state";
// Between our stop job and our start job of nvidia-gridd: a run killed there left it stopped, and
// the next run starts it again (one stopped without this record is an operator's, and stays stopped).
inline constexpr const char *STOPPED_BY_US = "stopped-by-us.state";
// Installed at boot, before nvidia-gridd's first start: the next run checks that it came up with them.
inline constexpr const char *BOOT_INSTALLED = "installed-at-boot.state";

}  // namespace unbounded::reload_records
