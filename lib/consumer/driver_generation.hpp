// What the Kubernetes consumers that read the driver root once (the device plugin, the DRA driver's
// kubelet plugin, GPU Feature Discovery, dcgm-exporter) have to follow, and whether they have.
//
// setup and refresh keep a generation of what our specs offer (the driver version and the specs'
// bytes: its files, GPUs, MIG devices, IMEX channels) in /run/unbounded-nvidia/driver-generation.json:
// a new generation, with the time it began, whenever that changes. A consumer container created
// before that time holds the old view; unbounded-nvidia-consumers restarts it once and records what
// came of it in consumers.json, which verify reads. /run is the boot's: at each machine start the first
// generation is 1, and every container starts after it (containerd and kubelet wait for setup).
#pragma once

#include "error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

inline constexpr const char *DRIVER_GENERATION_FILE = "driver-generation.json";
inline constexpr const char *CONSUMERS_FILE = "consumers.json";
inline constexpr const char *CONSUMERS_UNIT = "unbounded-nvidia-consumers.service";

struct DriverGeneration {
	std::uint64_t generation = 0;
	std::string view;  // a digest of what consumers see (driver version and the specs' bytes)
	std::string driver_version;
	std::uint64_t changed_at_ns = 0;  // CLOCK_REALTIME, as the CRI's created_at
};

// A digest (FNV-1a 64, hex) of the parts: a change detector, nothing is trusted on it.
std::string view_digest(const std::vector<std::string_view> &parts);

// The record in the run directory (ours, root's, checked as every file there), nullopt when absent.
// Reads only: setup's executor and the consumers' helper write these files.
Result<std::optional<DriverGeneration>> read_driver_generation(int run_dir);
// The generation as of `view`: the recorded one when its view is the same, else the next one,
// beginning at `now_ns` (an unreadable record, none: 1).
struct Advanced {
	DriverGeneration current;
	bool changed = false;
};
Advanced next_generation(const std::optional<DriverGeneration> &recorded, const std::string &view, const std::string &driver_version,
			 std::uint64_t now_ns);
std::string generation_json(const DriverGeneration &g);

// One consumer container restarted for a generation, and what came of it.
struct ConsumerRestart {
	std::string pod_namespace, pod, pod_uid, container;
	std::string matched;  // the selector it matched
	std::string outcome;  // "restarted" (running again, on the new view), "not-back", "stop-failed"
	std::string detail;   // what failed, for the problem verify says
};

struct ConsumersRecord {
	std::uint64_t generation = 0;  // the generation these restarts were for
	bool finished = false;         // false while the helper stops and waits
	std::string runtime;           // the CRI socket asked
	std::string runtime_warning;   // the runtime could not be asked: nothing was restarted
	std::vector<ConsumerRestart> consumers;
	// Every restart of this boot, by container name and outcome (the metrics' counts).
	std::vector<std::pair<std::string, std::uint64_t>> counts;  // "container\toutcome" -> n
};

Result<std::optional<ConsumersRecord>> read_consumers_record(int run_dir);
std::string consumers_record_json(const ConsumersRecord &record);

// Whether the consumers still have to follow `current`: a generation after the boot's first that no
// finished record covers.
bool consumers_pending(const DriverGeneration &current, const std::optional<ConsumersRecord> &record);

}  // namespace unbounded
