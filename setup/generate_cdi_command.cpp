// `generate-cdi`: the spec for the live driver root and devices, to stdout or a file (atomically).
#include "commands.hpp"

#include "cdi_state.hpp"
#include "execute.hpp"
#include "live_root.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "setup_report.hpp"

#include <cstdio>
#include <unistd.h>

namespace unbounded {

int run_generate_cdi(const Context &ctx, Report &report, const std::string &output)
{
	report.command = "generate-cdi";
	// The report says why; the journal's entry carries errno and the path.
	const auto fail_with = [&](const std::string &prefix, const Error &e, const std::string &path, int exit_code) {
		report.outcome = "failed";
		report.error = e.message;
		log::error(prefix + e.message, {{"MESSAGE_ID", message_id::GENERATE_CDI_FAILED}, {"ERRNO", std::to_string(e.errnum)}, {"UNBOUNDED_NVIDIA_PATH", path}});
		return exit_code;
	};
	const Config &cfg = ctx.config;
	const LiveRootRead live = read_live_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root});
	auto problems = live.check();
	if (!problems.empty()) {
		report.problems = problems;
		return fail_with("", make_error("Driver root is not usable: " + problems.front().message), cfg.driver_root, EXIT_NOT_READY);
	}
	const Manifest &manifest = *live.manifest();
	auto state = plan_specs(cfg.driver_root, manifest, read_machine_devices(ctx, /*learn_hook=*/false));
	if (!state)
		return fail_with("Failed to generate the CDI spec: ", state.error(), cfg.driver_root, state.error().exit_code);
	report.facts.driver_version = manifest.driver_version;
	report.details["cdi_version"] = state->spec.cdi_version;
	report.facts.gpus = state->devices.gpus.size();
	report.facts.cdi_devices = state->spec.devices;
	report.details["cdi_mounts"] = state->spec.mounts;
	report.details["cdi_device_nodes"] = state->spec.device_nodes;
	warn(report, state->devices.warnings);
	Result<void> written;
	if (output == "-")
		written = fs::write_all(STDOUT_FILENO, state->spec.yaml, "standard output");
	else if (auto w = write_generated_spec(output, state->spec.yaml); !w)
		written = fail(w.error());
	if (!written)
		return fail_with("", written.error(), output, EXIT_NOT_READY);
	report.outcome = "ready";
	return EXIT_READY;
}

}  // namespace unbounded
