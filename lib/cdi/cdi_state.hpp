// The CDI spec that belongs to a driver root and the devices the machine has right now.
#pragma once

#include "cdi_spec.hpp"
#include "context.hpp"
#include "devices.hpp"
#include "error.hpp"
#include "manifest.hpp"

#include <optional>
#include <set>
#include <string>

namespace unbounded {

// What the machine offers a spec, read once per run (the run's snapshot holds it): the
// devices, and the hook with what it can do. The specs are then a pure function of it and the root.
struct MachineDevices {
	Result<DeviceInventory> devices = fail(make_error("The devices were not read"));
	std::optional<std::string> hook_path;  // unset: no hook, or one that cannot say what it has
	std::set<std::string> hook_commands;
	std::string hook_warning;  // why the hook is not used ("" when it is, or there is none)
	std::string hook_memo;     // what the hook was learnt to have, for the executor to save ("": nothing new)
};

// Writes nothing. `learn_hook`: what the hook was learnt to have (by running it) is kept in
// hook_memo for the executor to save in the run directory (setup and refresh); verify and
// generate-cdi only read the memo, or ask the hook without saving.
MachineDevices read_machine_devices(const Context &ctx, bool learn_hook);

struct SpecForState {
	CdiSpec spec;
	DeviceInventory devices;
	std::optional<CdiSpec> imex;                           // the IMEX channel spec, when the machine has channels
	std::vector<std::pair<const char *, CdiSpec>> fabric;  // (kind, spec) of each fabric class with nodes

	// The spec of a side_specs() kind, null when the machine has none of its devices.
	const CdiSpec *side(const char *kind) const;
};

// The specs for the driver root `manifest` (served at `driver_root`, the machine's path) on the
// machine's devices as read. Pure: it reads and writes nothing, so a plan can be made again (the
// ENOSPC retry) and tested on devices made up in memory. Fails only when the devices could not be read.
Result<SpecForState> plan_specs(const std::string &driver_root, const Manifest &manifest, const MachineDevices &machine);

// What `expected_gpus` asks for beside what the machine offers: nullopt when it is unset or met,
// else one sentence naming the shortfall (and the listed GPUs without a node) for setup's warning
// and verify's problem.
std::optional<std::string> gpu_shortfall(std::optional<unsigned> expected, const DeviceInventory &devices,
					 const std::vector<std::string> &assigned = {}, const std::string &assigned_origin = {});

}  // namespace unbounded
