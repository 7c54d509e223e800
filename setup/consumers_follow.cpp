// The Kubernetes consumers that read the driver root once (lib/consumer/driver_generation.hpp): setup
// and refresh start a new generation when what our specs offer changed and start
// unbounded-nvidia-consumers.service to restart them; verify says whether they followed.
#include "commands.hpp"

#include "build_config.h"

#include "driver_generation.hpp"
#include "execute.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "unit_manager.hpp"

#include <chrono>

namespace unbounded {
namespace {

// A build without gRPC or the CRI's api.proto has no helper and no unit to start (-Dconsumers): the
// consumers are then as with consumers.enabled off.
bool consumers_followed_here(const Config &cfg)
{
	return HAVE_CONSUMERS && cfg.consumers.enabled;
}

std::uint64_t now_ns()
{
	return static_cast<std::uint64_t>(
		std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// The consumers' helper, queued and not waited for: it waits for the restarted pods, minutes at most,
// which a refresh must not.
void start_consumers_unit(const Context &ctx, std::uint64_t generation)
{
	std::string why;
	auto units = unit_manager_or_why(ctx, why);
	if (!units) {
		log::debug(std::string("Not starting ") + CONSUMERS_UNIT + ": " + why);
		return;
	}
	if (auto r = units->start(CONSUMERS_UNIT, Millis(0)); !r)
		log::warning("Failed to start " + std::string(CONSUMERS_UNIT) + " for driver root generation " + std::to_string(generation) +
			     ": " + r.error().message + "; the GPU consumers keep the previous driver until restarted");
}

}  // namespace

void follow_driver_generation(const Context &ctx, Report &report, int run_dir, const SpecForState &cdi,
			      const std::string &driver_version)
{
	// The specs' bytes are looked at, not copied (nvidia.yaml of 8 GPUs with 7 MIG instances each is
	// 100 KB, and its copy was most of this step's cost on every run); the small fabric specs are
	// joined to their kind as the digest has always taken them.
	std::vector<std::string> fabric;
	for (const auto &[kind, spec] : cdi.fabric)
		fabric.push_back(std::string(kind) + "\n" + spec.yaml);
	std::vector<std::string_view> parts{driver_version, cdi.spec.yaml, cdi.imex ? std::string_view(cdi.imex->yaml) : std::string_view()};
	parts.insert(parts.end(), fabric.begin(), fabric.end());
	auto recorded = read_driver_generation(run_dir);
	std::optional<DriverGeneration> base = recorded ? *recorded : std::nullopt;
	if (!recorded) {
		// Unreadable: go on after the generation the consumers last followed, so that the next one is
		// still later than theirs (the consumers then follow it once, as a change would have asked).
		log::warning(recorded.error().message + ", numbering the driver root's generations after the consumers' record");
		auto followed = read_consumers_record(run_dir);
		base = DriverGeneration{followed && *followed ? (*followed)->generation : 0, "", "", 0};
	}
	const Advanced advanced = next_generation(base, view_digest(parts), driver_version, now_ns());
	const DriverGeneration &g = advanced.current;
	if (advanced.changed)
		if (auto w = record_driver_generation(run_dir, generation_json(g)); !w) {
			log::warning(w.error().message + ", not recording the driver root's generation");
			return;
		}
	report.facts.driver_root_generation = g.generation;
	if (advanced.changed && g.generation > 1)
		log::notice("What the GPU consumers see changed (driver " + driver_version + "): driver root generation " +
				    std::to_string(g.generation) + ".",
			    {{"MESSAGE_ID", message_id::DRIVER_GENERATION_CHANGED},
			     {"UNBOUNDED_NVIDIA_DRIVER_VERSION", driver_version},
			     {"UNBOUNDED_NVIDIA_GENERATION", std::to_string(g.generation)}});
	if (!consumers_followed_here(ctx.config) || g.generation <= 1)
		return;  // the boot's first generation: every container started after it
	auto record = read_consumers_record(run_dir);
	if (!record) {
		log::warning(record.error().message + ", taking the consumers as not restarted");
		record = std::optional<ConsumersRecord>();
	}
	if (consumers_pending(g, *record)) {
		report.details["consumers_pending"] = true;
		start_consumers_unit(ctx, g.generation);
	}
}

std::vector<Problem> check_consumers_followed(const Context &ctx, Report &report)
{
	std::vector<Problem> problems;
	auto dir = fs::open_dir(ctx.real(RUN_DIR));  // verify writes nothing, the run directory included
	if (!dir)
		return problems;
	auto g = read_driver_generation(dir->get());
	if (!g || !*g) {
		if (!g)
			report.warnings.push_back(g.error().message);
		return problems;
	}
	report.facts.driver_root_generation = (*g)->generation;
	// Off: the device plugin's spec check still names a stale plugin. A --root tree: no service
	// manager of this system starts the helper for it (as check_protected_units, not checked).
	if (!consumers_followed_here(ctx.config) || !has_unit_manager(ctx))
		return problems;
	const std::string record_path = std::string(RUN_DIR) + "/" + CONSUMERS_FILE;
	auto record = read_consumers_record(dir->get());
	if (!record)
		return {Problem{record_path, record.error().message}};
	if (consumers_pending(**g, *record)) {
		const bool asked = *record && (*record)->generation == (*g)->generation && !(*record)->runtime_warning.empty();
		problems.push_back({record_path, "The GPU consumers (device plugin, DRA plugin, GPU Feature Discovery, dcgm-exporter) have not "
						 "followed driver root generation " +
							 std::to_string((*g)->generation) + " (driver " + (*g)->driver_version + ") yet: " +
							 (asked ? (*record)->runtime_warning + "; the next refresh asks again"
								: std::string(CONSUMERS_UNIT) + " restarts them")});
		return problems;
	}
	if (!*record || (*record)->generation != (*g)->generation)
		return problems;
	if (!(*record)->runtime_warning.empty())
		report.warnings.push_back((*record)->runtime_warning);
	for (const auto &c : (*record)->consumers)
		if (c.outcome != "restarted")
			problems.push_back({c.pod_namespace + "/" + c.pod,
					    "The GPU consumer " + c.pod_namespace + "/" + c.pod + " (container " + c.container + ") " +
						    (c.outcome == "stop-failed" ? "could not be restarted" : "did not run again after its restart") +
						    " for driver " + (*g)->driver_version + ": " + c.detail + "; it is not restarted again"});
	return problems;
}

}  // namespace unbounded
