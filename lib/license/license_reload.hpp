// The vGPU license reloader: applies rotated licensing files (gridd.conf, the NLS client configuration
// token) by restarting nvidia-gridd alone, which reads them only at start. Content is compared, never
// mtimes; a random jitter spreads a cluster-wide rotation; a config after which nvidia-gridd does not
// stay up is rolled back to the last known good files and not retried until its content changes.
// Nothing here touches the driver, the kernel module or workloads, and no file content is logged.
#pragma once

#include "context.hpp"
#include "error.hpp"
#include "feature_type.hpp"
#include "unit_manager.hpp"

#include <cstdint>
#include <functional>
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

// One complete set of licensing file contents, by item name, as the reloader records it in its state
// directory (a length-prefixed text format, parsed strictly).
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

// What the reloader needs from the world besides files and units; tests replace them.
struct ReloadSeams {
	std::function<void(Millis)> sleep;                         // the jitter: returns early once stop_requested()
	std::function<void(Millis)> wait;                          // inside a restart: the whole time, stop or not
	std::function<std::uint64_t(std::uint64_t)> random_below;  // uniform in [0, bound)
	std::function<bool(std::uint32_t)> pid_alive;
	std::function<bool()> stop_requested;
	std::function<void(std::string_view stage)> after_stage;  // test hooks: "recorded" (bytes taken), "installed"
	// The FeatureType the driver holds a license for on this boot of the host (feature_type.hpp),
	// none when no license was seen on it: a rotation to another one waits for the host's reboot.
	std::function<std::optional<int>()> licensed_feature;
};

enum class ReloadOutcome {
	Disabled,        // VGPU_LICENSE_AUTO_RELOAD / licensing.auto_reload off
	NoSource,        // no licensing files anywhere: nothing configured
	Unchanged,       // content equals the last applied copy
	Recorded,        // first run: the installed files are the source's, recorded without a restart
	KnownBad,        // content equals a copy that failed before: not retried until it changes
	Applied,         // installed, nvidia-gridd restarted (or not running) and alive
	RolledBack,      // nvidia-gridd did not stay up: last known good restored and running again
	Failed,          // could not apply or roll back; nvidia-gridd may be down
	Interrupted,     // stopped (SIGTERM) before anything was changed, or while a restart's outcome was unknown
	Installed,       // boot: the source's files installed for nvidia-gridd's first start, checked by the next run
	Verified,        // files installed at boot: nvidia-gridd started with them and runs, recorded as applied
	RebootRequired,  // the source's FeatureType differs from the feature licensed on this host boot: kept back
};
const char *outcome_name(ReloadOutcome o);

struct ReloadReport {
	ReloadOutcome outcome = ReloadOutcome::Unchanged;
	unsigned restarts = 0;                   // nvidia-gridd restarts, rollbacks included
	unsigned applied = 0;                    // sets applied in this run (a rotation during the run makes it 2)
	Millis jitter{0};                        // the last jitter slept
	std::vector<std::string> messages;       // what happened, in order, without file contents
	std::optional<FeatureChange> held_back;  // RebootRequired: what waits for the host's reboot
};

class LicenseReloader {
public:
	LicenseReloader(const Context &ctx, UnitManager &units, ReloadSeams seams);
	// One run: compare, apply, re-check the source before returning (path units drop events while
	// the service runs). Errors are usage/config problems; operational failures are outcomes.
	Result<ReloadReport> run();
	// At boot, ordered before nvidia-gridd: installs the source's files so its first start reads them.
	// No jitter, no restart, no service manager. The next run() checks that nvidia-gridd came up.
	Result<ReloadReport> install_at_boot();

	// The source as it is now: the directory first, per file the legacy path.
	Result<LicenseSet> read_source() const;

private:
	Result<std::optional<LicenseSet>> read_state(const char *name) const;
	Result<void> write_state(const char *name, const std::optional<LicenseSet> &set) const;
	LicenseSet read_targets() const;
	void enforce_target_attributes(ReloadReport &report) const;
	Result<void> install(const LicenseSet &set, const LicenseSet *previous) const;
	enum class Restart {
		Up,
		Down,
		NotStarted,
	};
	Result<Restart> restart_gridd(ReloadReport &report);
	bool shutting_down();
	Result<bool> check_boot_install(ReloadReport &report);
	Result<void> roll_back(ReloadReport &report, const LicenseSet &good, const LicenseSet &bad);
	Result<void> restart_with_good(ReloadReport &report);
	Result<bool> rollback_unfinished();
	using Body = Result<void> (LicenseReloader::*)(ReloadReport &);
	Result<ReloadReport> prepared(Body body);
	Result<void> reload_rounds(ReloadReport &report);
	Result<void> install_boot_files(ReloadReport &report);
	Result<void> install_for_restart(const LicenseSet &latest, const LicenseSet &running, bool resumed) const;
	Result<bool> restart_unjudged(const std::optional<LicenseSet> &applied) const;
	Result<bool> apply_set(ReloadReport &report, const LicenseSet &latest, const LicenseSet &running, bool resumed);
	enum class Round {
		Done,
		Again,
	};
	Result<Round> run_round(ReloadReport &report, unsigned round, bool decided);
	Result<Round> apply_change(ReloadReport &report, const LicenseSet &source, const std::optional<LicenseSet> &applied, bool unverified,
				   bool set_outcome);
	Result<void> known_bad(ReloadReport &report, const LicenseSet &source, const std::optional<LicenseSet> &applied, bool unverified,
			       bool set_outcome);
	bool sleep_jitter(ReloadReport &report, const LicenseSet &source, bool unverified);
	bool held_for_reboot(ReloadReport &report, const LicenseSet &source, bool set_outcome) const;
	Result<bool> kept_for_reboot(ReloadReport &report, const LicenseSet &set, const std::optional<LicenseSet> &applied, bool unverified,
				     bool set_outcome);
	void note(ReloadReport &r, std::string msg) const;

	const Context &ctx_;
	UnitManager &units_;
	ReloadSeams seams_;
	std::vector<LicenseItem> items_;
};

// The reloader's records in its state directory (LicenseSet::serialize), by file name.
namespace reload_records {

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

}  // namespace reload_records
}  // namespace unbounded
