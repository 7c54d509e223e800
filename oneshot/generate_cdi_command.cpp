// `generate-cdi`: the spec for the live driver root and devices, to stdout or a file (atomically).
#include "commands.hpp"

#include "cdi_state.hpp"
#include "log.hpp"

#include <cstdio>
#include <unistd.h>

namespace unbounded {

int run_generate_cdi(const Context &ctx, Report &report, const std::string &output)
{
	report.command = "generate-cdi";
	const Config &cfg = ctx.config;
	Manifest manifest;
	auto problems = verify_driver_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root}, &manifest);
	if (!problems.empty()) {
		report.outcome = "failed";
		report.problems = problems;
		report.error = "Driver root is not usable: " + problems.front().message;
		log::error(report.error);
		return EXIT_NOT_READY;
	}
	auto state = spec_for_state(ctx, manifest);
	if (!state) {
		report.outcome = "failed";
		report.error = state.error().message;
		log::error("Failed to generate the CDI spec: " + report.error);
		return state.error().exit_code;
	}
	report.details["driver_version"] = manifest.driver_version;
	report.details["cdi_version"] = state->spec.cdi_version;
	report.details["gpus"] = state->devices.gpus.size();
	report.details["cdi_devices"] = state->spec.devices;
	report.details["cdi_mounts"] = state->spec.mounts;
	report.details["cdi_device_nodes"] = state->spec.device_nodes;
	for (const auto &w : state->devices.warnings) {
		log::warning(w);
		report.warnings.push_back(w);
	}
	if (output == "-") {
		const std::string &y = state->spec.yaml;
		for (std::size_t off = 0; off < y.size();) {
			ssize_t n = ::write(STDOUT_FILENO, y.data() + off, y.size() - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				report.outcome = "failed";
				report.error = errno_error(errno, "Failed to write the spec to stdout").message;
				log::error(report.error);
				return EXIT_NOT_READY;
			}
			off += static_cast<std::size_t>(n);
		}
	} else {
		auto w = fs::write_file_atomic(output, state->spec.yaml, {.mode = 0644, .fsync = true, .skip_if_unchanged = true});
		if (!w) {
			report.outcome = "failed";
			report.error = w.error().message;
			log::error(report.error);
			return EXIT_NOT_READY;
		}
	}
	report.outcome = "ready";
	return EXIT_READY;
}

}  // namespace unbounded
