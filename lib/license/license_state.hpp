// Whether nvidia-gridd holds a license, from what it logs. Observed, never acted on: a vGPU license is
// a lease with a 20-minute grace period, so a restart, rollback or retry driven by it would turn a
// license server outage into a restart storm across the fleet (doc/how-it-works.md, "Licensing you can see").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

enum class LicenseState {
	Licensed,    // it acquired (or renewed) a license and lost none since
	Unlicensed,  // it failed to acquire one, or lost or returned the one it had, since its last success
	Pending,     // running, and it has said neither yet
	Unknown,     // not running, or no readable journal
};
inline constexpr LicenseState ALL_LICENSE_STATES[] = {LicenseState::Licensed, LicenseState::Unlicensed, LicenseState::Pending,
						      LicenseState::Unknown};
const char *license_state_name(LicenseState s);
std::optional<LicenseState> license_state_from_name(std::string_view name);

// What one nvidia-gridd message says about the license.
struct GriddLineMeaning {
	// RenewalFailed: a renewal did not go through; the lease still runs to its expiry (nvidia-gridd
	// retries), so it ends a license only where no expiry is known.
	enum class Kind {
		Nothing,
		Acquired,
		NotLicensed,
		RenewalFailed,
	} kind = Kind::Nothing;
	std::optional<std::int64_t> expiry;  // Unix time, from "Expiry: ..." of an acquisition, when it printed one
};
GriddLineMeaning classify_gridd_line(std::string_view message);

// "Expiry: 2023-10-6 20:1:37 GMT" -> Unix time. nvidia-gridd does not pad the fields; GMT and UTC
// only (a local-time expiry cannot be placed), "N/A" none.
std::optional<std::int64_t> parse_gridd_expiry(std::string_view message);

struct GriddLine {
	std::uint64_t realtime_usec = 0;  // the journal entry's time
	std::string message;
};

struct LicenseObservation {
	LicenseState state = LicenseState::Unknown;
	std::optional<std::int64_t> expiry;  // licensed only
	std::uint64_t since_usec = 0;        // the deciding message's time; for pending, nvidia-gridd's start
};

// Takes one message, oldest first, into `o`: an acquisition or a loss decides; a failed renewal keeps
// a license whose expiry is known (the clock ends it, license_metrics.hpp) and ends any other.
void take_gridd_line(LicenseObservation &o, const GriddLine &line);

}  // namespace unbounded
