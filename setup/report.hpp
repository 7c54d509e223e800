// The result of a command as one JSON object: printed with --json and, for setup, kept in
// /run/unbounded-nvidia/status.json for the host's reconcile loop and for operators.
#pragma once

#include "consumer_check.hpp"
#include "driver_root.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// What later steps of a run read back (the metrics, node-problem-detector's line, verify's own
// checks, whether a refresh changed anything): typed, put into the JSON by to_json() after the
// details, which nothing reads back. Unset: not said.
struct RunFacts {
	std::optional<std::string> driver_version, kernel_module_version, staged_driver_version;
	std::optional<std::uint64_t> files_copied, files_reused, bytes_copied, bytes_reused;
	std::optional<std::uint64_t> driver_root_ram_bytes;  // on tmpfs only
	std::optional<std::size_t> gpus, expected_gpus, cdi_devices;
	std::optional<std::uint64_t> driver_root_generation;
	std::vector<std::pair<std::string, std::size_t>> consumer_findings;  // every check, in CONSUMER_CHECKS order
	std::optional<std::size_t> dra_claim_specs;
	std::optional<std::string> gpu_shortfall;  // fewer GPUs than expected_gpus: verify's problem, not in the JSON
	bool files_changed = false;                // a spec written, a /dev/char link made or removed
};

struct Report {
	std::string command;
	std::string outcome;  // "ready", "no-gpu", "pending-host-reboot", "staging-inconsistent", "staging-gone", "not-ready", "failed"
	RunFacts facts;
	nlohmann::ordered_json details = nlohmann::ordered_json::object();
	nlohmann::ordered_json timings_ms = nlohmann::ordered_json::object();
	std::vector<std::string> warnings;  // something a pod may need is missing or odd; verify carries the last run's
	std::vector<std::string> notes;     // what was skipped that nothing needs (Debian's alternatives links, ...)
	std::vector<Problem> problems;
	std::string error;
	// Not part of the JSON: our specs as setup or refresh left them (by configured path), for the
	// consumer check after the run, which then neither reads nor parses them again.
	KnownSpecs specs_in_place;
	// The device plugin's spec as the run read it, for the consumer check's scan of its directory.
	std::optional<ReadSpecFile> device_plugin_read;
	// Not part of the JSON either: the run failed on the host's side (staging half-upgraded, another
	// module version, nothing bound), which may be on its way; and whether setup --boot will try again
	// after such a failure (then it is not said as the run's failure).
	bool host_not_ready = false;
	bool may_retry = false;

	// The live state serves containers: also when it keeps a root the host has moved past.
	bool ready() const
	{
		return outcome == "ready" || outcome == "no-gpu" || outcome == "pending-host-reboot" || outcome == "staging-inconsistent";
	}
	std::string to_json() const;
};

// Times a phase into report.timings_ms[name].
class PhaseTimer {
public:
	PhaseTimer(Report &r, const char *name) : r_(r), name_(name), start_(std::chrono::steady_clock::now()) {}
	~PhaseTimer()
	{
		r_.timings_ms[name_] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
	}
	PhaseTimer(const PhaseTimer &) = delete;
	PhaseTimer &operator=(const PhaseTimer &) = delete;

private:
	Report &r_;
	const char *name_;
	std::chrono::steady_clock::time_point start_;
};

}  // namespace unbounded
