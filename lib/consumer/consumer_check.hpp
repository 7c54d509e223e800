// Will the container runtime give pods our devices? `verify` is asked by the host's reconcile loop
// whether GPU pods work, and a right driver root and spec are not enough: containerd 1.7 has CDI off
// by default, refuses a cdiVersion newer than its CDI library, and a spec in /var/run/cdi (written by
// a pod: hostile) overrides the same device in /etc/cdi. The DRA driver's per-claim specs point into
// the driver root and go stale after a driver change like the device plugin's.
// From files, and containerd's own answer, within the budgets of the device plugin's check (cdi_check.hpp).
#pragma once

#include "cdi_spec.hpp"
#include "context.hpp"
#include "driver_root.hpp"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// What the consumer check takes from a spec of ours: its kind and cdiVersion.
struct SpecFacts {
	std::string kind, cdi_version;
};

struct ConsumerFinding {
	std::string check;       // one of CONSUMER_CHECKS
	const char *message_id;  // message_ids.hpp
	Problem problem;
	bool warning = false;  // never makes verify not ready (claims come and go; an unreadable config)
};

// Every check name, for metrics that show a zero as well as a count.
// Problems: cdi-disabled, cdi-spec-dirs, cdi-version, shadowed (a file not ours that names the kind
// of one of ours: foreign_spec.hpp), unjudged (a file the CDI library reads that verify cannot: past
// its limits, or not YAML to it), cdi-crash (a file the CDI library may panic on), cdi-blocking (a
// FIFO or device node where the library reads a spec: it hangs or never ends), config-refused
// (containerd refuses its configuration and does not start), cdi-schema (a file that replaces the
// CDI schema of every runtime), cdi-scan (a directory too full or slow to read whole). Warnings:
// dra-stale, containerd-config (unreadable, or the version unknown), nvidia-runtime
// (nvidia-container-runtime's configuration gives NVIDIA_VISIBLE_DEVICES another spec than ours).
inline constexpr const char *CONSUMER_CHECKS[] = {"cdi-disabled", "cdi-spec-dirs", "cdi-version", "shadowed", "unjudged",
						  "cdi-crash", "cdi-blocking", "config-refused", "cdi-schema", "dra-stale",
						  "containerd-config", "cdi-scan", "nvidia-runtime"};

struct ConsumerReport {
	std::vector<ConsumerFinding> findings;
	nlohmann::ordered_json containerd = nlohmann::ordered_json::object();  // verify --json "containerd" (or CRI-O: "runtime")
	nlohmann::ordered_json shadowing = nlohmann::ordered_json::array();    // "cdi_shadowing"
	nlohmann::ordered_json dra = nlohmann::ordered_json::object();         // "dra_claims"
	std::size_t dra_claim_specs = 0;                                       // the DRA driver's per-claim specs

	std::size_t count(std::string_view check) const;
};

// Of a spec this run generated: from what it was made of, never from its bytes.
SpecFacts spec_facts(const CdiSpec &spec);
// Of the bytes of a spec of ours that the run read: parsed as the check parses our specs; nullopt
// when the CDI library would skip it (not a document).
std::optional<SpecFacts> spec_facts(const std::string &text, const std::string &path);

// Our specs as the caller has just written or read them this run, by their configured path: those
// are not read or parsed again (each spec file once per run, and the boot path's re-run
// does not parse the spec it has just generated). nullopt: a spec the CDI library skips.
using KnownSpecs = std::map<std::string, std::optional<SpecFacts>>;

// A file of a spec directory the caller has read this run (the device plugin's spec): the scan takes
// its bytes, or the error of that read (EFBIG: over the cap), instead of opening it again.
struct ReadSpecFile {
	std::string path;
	std::shared_ptr<const Result<std::string>> text;  // the caller's, when it outlives the check
};

// `ask_runtime`: containerd is run to say what it makes of its configuration (containerd.hpp); not
// on the boot path.
ConsumerReport check_consumer(const Context &ctx, const KnownSpecs *known = nullptr, const ReadSpecFile *read = nullptr, bool ask_runtime = true);

}  // namespace unbounded
