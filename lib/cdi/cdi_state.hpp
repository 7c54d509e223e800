// The CDI spec that belongs to a driver root and the devices the machine has right now.
#pragma once

#include "cdi_spec.hpp"
#include "context.hpp"
#include "devices.hpp"
#include "error.hpp"
#include "manifest.hpp"

#include <optional>
#include <string>

namespace unbounded {

// The nvidia-cdi-hook path when that binary exists (a regular executable file) in the machine.
std::optional<std::string> cdi_hook_in_machine(const Context &ctx);

struct SpecForState {
	CdiSpec spec;
	DeviceInventory devices;
	std::optional<CdiSpec> imex;  // the IMEX channel spec, when the machine has channels
	std::vector<std::pair<const char *, CdiSpec>> fabric;  // (kind, spec) of each fabric class with nodes

	// The spec of a side_specs() kind, null when the machine has none of its devices.
	const CdiSpec *side(const char *kind) const;
};

// `learn_hook`: what the hook can do may be learnt by running it and memoised in the run directory
// (setup and refresh); verify and generate-cdi only read the memo, or ask the hook without saving.
Result<SpecForState> spec_for_state(const Context &ctx, const Manifest &manifest, bool learn_hook = false);

// What `expected_gpus` asks for beside what the machine offers: nullopt when it is unset or met,
// else one sentence naming the shortfall (and the listed GPUs without a node) for setup's warning
// and verify's problem.
std::optional<std::string> gpu_shortfall(std::optional<unsigned> expected, const DeviceInventory &devices);

}  // namespace unbounded
