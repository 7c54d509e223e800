// Self-repair after a failed boot. The generator makes containerd and kubelet require the
// boot's setup; when it fails, systemd fails their start jobs ("Dependency failed") and nothing would
// ever start them again. So:
//  - a failed boot setup records which of them were waiting for it (a start job queued), in
//    /run/unbounded-nvidia/held-back.json: exactly the units whose start our failure cancelled;
//  - a refresh that leaves the root ready starts those, containerd first, then kubelet (the start
//    pulls setup in again through Requires=, which finds the root ready and copies nothing);
//  - never a unit that is running, nor one that has been active since the record (an operator's);
//    the record is removed before the starts, so a start fails at most once per refresh, never loops.
// verify reads the protected units' states: containerd and kubelet down means pods cannot work.
#pragma once

#include "context.hpp"
#include "report.hpp"
#include "unit_manager.hpp"

#include <vector>

namespace unbounded {

inline constexpr const char *HELD_BACK_FILE = "held-back.json";
// The units the generator puts behind setup (Requires= and After=), in the order they start.
inline constexpr const char *PROTECTED_UNITS[] = {"containerd.service", "kubelet.service"};

// setup --boot failed: records the protected units whose start waited for it (report.details
// "held_back"), for the refresh that heals. Nothing to record: nothing is written.
void note_held_back(const Context &ctx, Report &report);

// A refresh left the root ready: starts what a failed boot setup held back (report.details
// "started_after_failed_boot"), each said in the journal.
void start_held_back(const Context &ctx, Report &report);

// A boot setup that succeeded: what waited for it starts now, an old record is void.
void clear_held_back(const Context &ctx);

// How many units a failed boot setup holds back now (the record), for the metrics: 0 when none.
std::size_t held_back_count(const Context &ctx);

// verify: a protected unit that is installed and not active is a problem naming it, its state and
// what will start it. No manager to ask (a --root tree, no bus): said in report.details["units"].
std::vector<Problem> check_protected_units(const Context &ctx, Report &report);

}  // namespace unbounded
