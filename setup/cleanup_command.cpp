// `cleanup`: what a machine that is not (any more) an NVIDIA machine runs before containerd starts
// (the generator emits unbounded-nvidia-cleanup.service only when a spec of ours is there). It
// removes the CDI spec we wrote: its driver root lived in /run and is gone, and containerd must not
// offer devices whose every hostPath is missing. A spec anyone else wrote is left alone. Run on a
// machine configured with GPUs (enabled: true, expected_gpus) whose host bound nothing, it removes
// the same, and says that the machine is broken (staging-gone), not a CPU node.
#include "commands.hpp"

#include "execute.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "side_specs.hpp"
#include "spec_marker.hpp"

namespace unbounded {

int run_cleanup(const Context &ctx, Report &report)
{
	report.command = "cleanup";
	report.outcome = "no-gpu";
	bool any = false;
	std::vector<std::pair<const char *, const std::string *>> specs{{"cdi_spec", &ctx.config.cdi_spec}};
	for (const auto &side : side_specs(ctx.config))
		specs.emplace_back(side.key, side.path);
	for (const auto &[key, path] : specs) {
		report.details[key] = *path;
		auto removed = remove_spec_of_ours(ctx, *path);
		if (!removed) {
			report.outcome = "failed";
			report.error = removed.error().message;
			log::error(removed.error().message, {{"MESSAGE_ID", message_id::CLEANUP_FAILED},
							     {"ERRNO", std::to_string(removed.error().errnum)},
							     {"UNBOUNDED_NVIDIA_PATH", *path}});
			return EXIT_NOT_READY;
		}
		report.details[std::string(key) + "_removed"] = *removed;
		any |= *removed;
		if (*removed)
			log::notice("Removed " + *path + ", written by unbounded-nvidia-setup when this was an NVIDIA machine: "
							 "its devices are gone, so containerd must not offer them.",
				    {{"MESSAGE_ID", message_id::CDI_SPEC_REMOVED}, {"UNBOUNDED_NVIDIA_PATH", *path}});
	}
	if (!any)
		log::info("Nothing to clean up: no CDI spec written by unbounded-nvidia-setup is left (" + ctx.config.cdi_spec +
			  " and the IMEX, NVSwitch, GDRCopy and GDS specs beside it).");
	// A machine the configuration says has GPUs is not a CPU node whose specs are merely old: its
	// specs name a driver root that is gone all the same, but the run says what is wrong.
	if (!configured_gpu_machine(ctx.config).empty()) {
		report.outcome = "staging-gone";
		report.problems.push_back(Problem{ctx.config.staging, nothing_bound_message(ctx.config)});
		log::error("Not ready: " + nothing_bound_message(ctx.config) + (any ? "; its stale CDI specs are removed" : ""),
			   {{"MESSAGE_ID", message_id::STAGING_GONE}, {"UNBOUNDED_NVIDIA_PATH", ctx.config.staging}});
		return EXIT_NOT_READY;
	}
	return EXIT_READY;
}

}  // namespace unbounded
