// Checks of CDI spec files as the container runtime will read them: strict structure (unknown fields
// fail the whole file in the CDI library, so they fail here), a cdiVersion no lower than the content
// needs, and every hostPath present, resolved inside the machine root. Used by setup (step 7), by
// `verify`, and for the NVIDIA device plugin's JSON spec.
#pragma once

#include "context.hpp"
#include "cdi_spec.hpp"
#include "driver_root.hpp"
#include "spec_read.hpp"
#include "unique_fd.hpp"

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace unbounded {

// Calls `fn` with each set of container edits of a spec that is a mapping: the top level's, then
// each device's.
template <class Fn>
void for_each_edits(const nlohmann::ordered_json &doc, Fn &&fn)
{
	if (doc.contains("containerEdits") && doc["containerEdits"].is_object())
		fn(doc["containerEdits"]);
	if (doc.contains("devices") && doc["devices"].is_array())
		for (const auto &d : doc["devices"])
			if (d.is_object() && d.contains("containerEdits") && d["containerEdits"].is_object())
				fn(d["containerEdits"]);
}

// The machine root (`/` without --root), O_PATH, for opens confined to it; invalid when it cannot be opened.
UniqueFd open_machine_root(const Context &ctx);

// Structure and version rules of the CDI spec (cncf-tags/container-device-interface 1.1.0).
void check_cdi_structure(const nlohmann::ordered_json &doc, const std::string &display, std::vector<Problem> &problems);

// What checking the paths of one spec may cost. A spec a pod wrote (/var/run/cdi) can name 15,000
// hostPaths, each through 40 symlinks of 4 KiB: unbounded, that took verify a minute and a refresh
// as long holding the lock. Past any of these the check stops with one problem saying so.
struct HostPathBudget {
	std::size_t failures = SIZE_MAX;  // stop after this many problems
	std::chrono::milliseconds time = std::chrono::milliseconds::max();
	std::uint64_t steps = UINT64_MAX;  // path components walked (ConfinedOpen::steps)
	bool limited() const { return steps != UINT64_MAX || failures != SIZE_MAX || time != std::chrono::milliseconds::max(); }
};
// For the device plugin's spec: the first few failures are what an operator reads (three are shown);
// a real spec of a few hundred paths takes a few thousand steps and milliseconds.
inline constexpr HostPathBudget FOREIGN_SPEC_BUDGET{3, std::chrono::milliseconds(300), 200000};

// Every mount hostPath (followed, inside the root), every device node (a character device of the
// major and minor the spec gives) and every hook path exists.
void check_cdi_host_paths(const Context &ctx, const nlohmann::ordered_json &doc, const std::string &display,
			  std::vector<Problem> &problems, const HostPathBudget &budget = {});

// Whether the spec's top-level mounts include libcuda.so.<v> and libnvidia-ml.so.<v>.
void check_core_mounts(const nlohmann::ordered_json &doc, const std::string &display, const std::string &version,
		       std::vector<Problem> &problems);

// A spec of ours as the caller read it once (spec_read.hpp): present, parses, valid, of `kind`, host paths and device nodes present
// (the majors and minors the spec gives), the driver's core libraries mounted (when a driver_version
// is given), and (when `expected` is given) byte-identical to what generate-cdi produces now, i.e.
// not stale. When the bytes are the expected ones, the expected spec stands for the parsed file: its
// mounts and hook are checked, its device nodes were read to generate it.
std::vector<Problem> verify_cdi_spec(const Context &ctx, const SpecRead &file, const std::string &driver_version,
				     const CdiSpec *expected, const std::string &kind = CDI_KIND);

// A spec another writer generated from the driver root with nvcdi (the device plugin, the DRA driver)
// whose paths say it was told another root: the first device node whose hostPath is under
// `driver_root`/dev/ (a device root that followed the driver root, which has no dev/); else, when no
// mount of libcuda.so.* or libnvidia-ml.so.* has its hostPath under `driver_root`, the first that
// has not, and the root it came from (the hostPath less its containerPath, "" when that cannot be
// told). Paths are compared as written: nvcdi writes them with symlinks resolved.
struct WrongRoot {
	bool device_node = false;
	std::string host_path, root;
};
std::optional<WrongRoot> generated_from_another_root(const nlohmann::ordered_json &doc, const std::string &driver_root);

// The device plugin's JSON spec, when it exists. With `wiring`: set when the spec was generated from
// another root (generated_from_another_root), a problem naming the plugin's settings; the spec's
// other problems, which follow from that, are then not listed.
std::vector<Problem> verify_device_plugin_spec(const Context &ctx, const std::string &path, const std::string &driver_version,
					       std::optional<Problem> *wiring = nullptr);
std::vector<Problem> verify_device_plugin_spec(const Context &ctx, const SpecRead &file, const std::string &driver_version,
					       std::optional<Problem> *wiring = nullptr);

}  // namespace unbounded
