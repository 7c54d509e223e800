// What the container runtime will do with our specs (lib/consumer/), into a command's report: verify
// counts a finding as not ready (pods get no GPU through containerd), except the warnings; setup and
// refresh record, log and count them as warnings: containerd is what they start, never what they
// wait on.
#include "commands.hpp"

#include "consumer_check.hpp"
#include "log.hpp"

namespace unbounded {

std::vector<Problem> record_consumer(const Context &ctx, Report &report, bool verify, const KnownSpecs *known, bool ask_runtime)
{
	PhaseTimer t(report, "check_consumer");
	ConsumerReport consumer = check_consumer(ctx, known, report.device_plugin_read ? &*report.device_plugin_read : nullptr, ask_runtime);
	report.details["containerd"] = std::move(consumer.containerd);
	report.details["cdi_shadowing"] = std::move(consumer.shadowing);
	report.details["dra_claims"] = std::move(consumer.dra);
	report.facts.consumer_findings.clear();
	for (const char *check : CONSUMER_CHECKS)
		report.facts.consumer_findings.emplace_back(check, consumer.count(check));
	report.facts.dra_claim_specs = consumer.dra_claim_specs;
	std::vector<Problem> problems;
	for (auto &f : consumer.findings) {
		const log::Fields fields{{"MESSAGE_ID", f.message_id}, {"UNBOUNDED_NVIDIA_PATH", f.problem.path}, {"UNBOUNDED_NVIDIA_CHECK", f.check}};
		if (f.warning || !verify) {
			// Counted by setup and refresh too (unbounded_nvidia_warnings): containerd with CDI off
			// or a spec shadowing ours makes pods fail while the root is right.
			log::warning(f.problem.message, fields);
			report.warnings.push_back(f.problem.message);
		} else {
			log::error("Not ready: " + f.problem.message, fields);
			problems.push_back(std::move(f.problem));
		}
	}
	return problems;
}

}  // namespace unbounded
