// The checks of the live state: verify's of what its snapshot read, and setup's last step of what it
// has just left in place. Both say the same things the same way; only where the facts come from
// differs (setup's are what it wrote, never read back).
#include "commands.hpp"

#include "cdi_check.hpp"

namespace unbounded {
namespace {

void check_module(const RunSnapshot &snap, const std::string &version, std::vector<Problem> &problems)
{
	if (const auto &kv = snap.module.version; kv && *kv != version)
		problems.push_back(Problem{PROC_DRIVER_VERSION,
					   "Kernel module is " + *kv + " but the driver root holds " + version +
						   ": start unbounded-nvidia-refresh.service to rebuild it (containerd keeps running)"});
}

// Each side spec (IMEX channels, NVSwitch, GDRCopy, GDS) exists exactly while the machine has its
// devices, and is checked like ours. When the devices could not be read (`current` null), a spec of
// ours that is there is still checked.
std::vector<Problem> check_side_spec(const Context &ctx, const SideSpec &side, const SpecRead &file, const SpecForState *current)
{
	const std::string &path = *side.path;
	if (const CdiSpec *spec = current ? current->side(side.kind) : nullptr)
		return verify_cdi_spec(ctx, file, "", spec, side.kind);
	if (!file.ours)
		return {};
	if (current)
		return {Problem{path, path + " is stale: it offers " + side.what + " but the machine has none (a setup or refresh removes it)"}};
	return verify_cdi_spec(ctx, file, "", nullptr, side.kind);
}

void record_state(Report &report, const SpecForState &state, const Config &cfg)
{
	if (auto shortfall = gpu_shortfall(cfg.expected_gpus, state.devices, cfg.assigned_gpus, cfg.origin("gpus")))
		report.facts.gpu_shortfall = *shortfall;
	report.facts.gpus = state.devices.gpus.size();
	report.details["mig_devices"] = state.devices.mig_devices();
	report.details["imex_channels"] = state.devices.imex_channels.size();
	report.details["cdi_version"] = state.spec.cdi_version;
	report.facts.cdi_devices = state.spec.devices;
	report.details["cdi_mounts"] = state.spec.mounts;
}

}  // namespace

std::vector<Problem> check_live_state(const Context &ctx, Report &report, const RunSnapshot &snap,
				      std::optional<SpecForState> &planned)
{
	const Config &cfg = ctx.config;
	std::vector<Problem> problems;
	{
		PhaseTimer t(report, "verify_driver_root");
		problems = snap.live.check();
	}
	// A root verify does not believe has no version: nothing else can be right.
	const Manifest *manifest = snap.live.problems.empty() ? snap.live.manifest() : nullptr;
	const std::string version = manifest ? manifest->driver_version : std::string();
	report.details["driver_root"] = cfg.driver_root;
	report.facts.driver_version = version;
	if (version.empty())
		return problems;
	check_module(snap, version, problems);

	PhaseTimer t(report, "verify_cdi");
	auto state = plan_specs(cfg.driver_root, *manifest, snap.machine);
	const SpecForState *current = nullptr;  // what the specs should be now, when the devices could be read
	if (!state) {
		problems.push_back(Problem{"/dev", state.error().message});
	} else {
		current = &planned.emplace(std::move(*state));
		record_state(report, *current, cfg);
	}
	report.details["cdi_spec"] = cfg.cdi_spec;
	for (auto &p : verify_cdi_spec(ctx, snap.cdi_spec, version, current ? &current->spec : nullptr))
		problems.push_back(std::move(p));
	for (const auto &[side, read] : snap.sides)
		for (auto &p : check_side_spec(ctx, side, read, current))
			problems.push_back(std::move(p));
	return problems;
}

std::vector<Problem> check_written_state(const Context &ctx, Report &report, const RunSnapshot &snap, const Manifest &root,
					 bool root_checked, const SpecForState &cdi)
{
	const Config &cfg = ctx.config;
	std::vector<Problem> problems;
	if (!root_checked) {
		PhaseTimer t(report, "verify_driver_root");
		problems = check_built_root(live_root_location(ctx), root);
	}
	report.details["driver_root"] = cfg.driver_root;
	report.facts.driver_version = root.driver_version;
	if (root.driver_version.empty())
		return problems;
	check_module(snap, root.driver_version, problems);

	PhaseTimer t(report, "verify_cdi");
	report.details["cdi_spec"] = cfg.cdi_spec;
	for (auto &p : verify_cdi_spec(ctx, SpecRead::written(cfg.cdi_spec, cdi.spec.yaml), root.driver_version, &cdi.spec))
		problems.push_back(std::move(p));
	// A side spec of ours without devices was removed by this run; one of anyone else's is left alone.
	for (const SideSpecRead &side : snap.sides)
		if (const CdiSpec *spec = cdi.side(side.spec.kind))
			for (auto &p : verify_cdi_spec(ctx, SpecRead::written(*side.spec.path, spec->yaml), "", spec, side.spec.kind))
				problems.push_back(std::move(p));
	return problems;
}

}  // namespace unbounded
