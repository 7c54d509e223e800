// `generate-cdi`: the spec for the live driver root and devices, to stdout or a file (atomically).
#include "commands.hpp"

#include "cdi_state.hpp"
#include "execute.hpp"
#include "live_root.hpp"
#include "log.hpp"
#include "message_ids.hpp"

#include <cstdio>
#include <unistd.h>

namespace unbounded {

namespace {

void failed(const std::string &message, const std::string &path, int errnum = 0)
{
	log::error(message, {{"MESSAGE_ID", message_id::GENERATE_CDI_FAILED}, {"ERRNO", std::to_string(errnum)}, {"UNBOUNDED_NVIDIA_PATH", path}});
}

}  // namespace

int run_generate_cdi(const Context &ctx, Report &report, const std::string &output)
{
	report.command = "generate-cdi";
	const Config &cfg = ctx.config;
	const LiveRootRead live = read_live_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root});
	auto problems = live.check();
	if (!problems.empty()) {
		report.outcome = "failed";
		report.problems = problems;
		report.error = "Driver root is not usable: " + problems.front().message;
		failed(report.error, cfg.driver_root);
		return EXIT_NOT_READY;
	}
	const Manifest &manifest = *live.manifest();
	auto state = spec_for_state(ctx, manifest);
	if (!state) {
		report.outcome = "failed";
		report.error = state.error().message;
		failed("Failed to generate the CDI spec: " + report.error, cfg.driver_root, state.error().errnum);
		return state.error().exit_code;
	}
	report.facts.driver_version = manifest.driver_version;
	report.details["cdi_version"] = state->spec.cdi_version;
	report.facts.gpus = state->devices.gpus.size();
	report.facts.cdi_devices = state->spec.devices;
	report.details["cdi_mounts"] = state->spec.mounts;
	report.details["cdi_device_nodes"] = state->spec.device_nodes;
	for (const auto &w : state->devices.warnings) {
		log::warning(w);
		report.warnings.push_back(w);
	}
	if (output == "-") {
		if (auto w = fs::write_all(STDOUT_FILENO, state->spec.yaml, "standard output"); !w) {
			report.outcome = "failed";
			report.error = w.error().message;
			failed(report.error, "-", w.error().errnum);
			return EXIT_NOT_READY;
		}
	} else {
		auto w = write_generated_spec(output, state->spec.yaml);
		if (!w) {
			report.outcome = "failed";
			report.error = w.error().message;
			failed(report.error, output, w.error().errnum);
			return EXIT_NOT_READY;
		}
	}
	report.outcome = "ready";
	return EXIT_READY;
}

}  // namespace unbounded
