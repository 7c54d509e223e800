#include "setup_report.hpp"

#include "commands.hpp"
#include "format.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "sd_protocols.hpp"

namespace unbounded {

int finish_failed(const Context &ctx, Report &report, const Error &e)
{
	report.outcome = "failed";
	report.error = e.message;
	if (report.may_retry && report.host_not_ready) {  // setup --boot tries again: not the last word
		log::debug("Not ready yet: " + e.message);
		notify_status("Waiting for the host: " + e.message);
		return e.exit_code == EXIT_READY ? EXIT_NOT_READY : e.exit_code;
	}
	// Each command's failure in its own words: a refresh runs beside a working machine, its failure
	// changed nothing and is not setup's; verify's is a verdict.
	const std::string &c = report.command;
	const char *id = c == "refresh" ? message_id::REFRESH_FAILED : c == "verify" ? message_id::VERIFY_FAILED
										     : message_id::SETUP_FAILED;
	const std::string what = c == "refresh"  ? "Refresh failed, the machine keeps what it had: "
				 : c == "verify" ? "Not ready: "
				 : c == "setup"  ? "Setup failed: "
						 : "Failed to " + c + ": ";
	// The path every entry of these IDs names: what the run was building or checking.
	log::error(what + e.message,
		   {{"MESSAGE_ID", id},
		    {"ERRNO", std::to_string(e.errnum)},
		    {"UNBOUNDED_NVIDIA_DRIVER_ROOT", ctx.config.driver_root},
		    {"UNBOUNDED_NVIDIA_PATH", ctx.config.driver_root}});
	notify_status("Failed: " + e.message);
	return e.exit_code == EXIT_READY ? EXIT_NOT_READY : e.exit_code;
}

void warn(Report &report, const std::vector<std::string> &warnings)
{
	for (const auto &w : warnings) {
		log::warning(w);
		report.warnings.push_back(w);
	}
}

void warn_about_device_plugin(const Context &ctx, Report &report, const SpecRead &spec, const std::string &version)
{
	report.details["device_plugin_spec"] = ctx.config.device_plugin_spec;
	report.device_plugin_read = ReadSpecFile{ctx.config.device_plugin_spec, std::make_shared<const Result<std::string>>(spec.text)};
	auto p = check_device_plugin(ctx, spec, version);
	report.details["device_plugin_spec_current"] = !p.has_value();
	if (!p)
		return;
	log::warning(p->message, {{"MESSAGE_ID", message_id::DEVICE_PLUGIN_SPEC_STALE}, {"UNBOUNDED_NVIDIA_PATH", p->path}});
	report.warnings.push_back(p->message);
}

// What the devices say, and the GPUs the machine offers beside expected_gpus: fewer are served
// (exit 0: one missing GPU must not take the others down), said here and made a problem by verify.
void warn_about_devices(const Context &ctx, Report &report, const DeviceInventory &devices)
{
	warn(report, devices.warnings);
	report.facts.gpus = devices.gpus.size();
	report.details["mig_devices"] = devices.mig_devices();
	if (ctx.config.expected_gpus)
		report.facts.expected_gpus = *ctx.config.expected_gpus;
	if (auto shortfall = gpu_shortfall(ctx.config.expected_gpus, devices, ctx.config.assigned_gpus, ctx.config.origin("gpus"))) {
		log::warning(*shortfall + ": serving the GPU(s) there are.", {{"MESSAGE_ID", message_id::GPUS_MISSING}});
		report.warnings.push_back(*shortfall + ": serving the GPU(s) there are");
	}
}

int finish_not_ready(Report &report)
{
	report.outcome = "not-ready";
	for (const auto &p : report.problems)
		log::error("Not ready: " + p.message, {{"MESSAGE_ID", message_id::VERIFY_FAILED},
						       {"UNBOUNDED_NVIDIA_PATH", p.path}});
	report.error = std::to_string(report.problems.size()) + " verification problem(s), first: " +
		       report.problems.front().message;
	notify_status("Not ready: " + report.problems.front().message);
	return EXIT_NOT_READY;
}

void record_install(const Context &ctx, Report &report, const InstallStats &stats)
{
	report.details["cdi_spec"] = ctx.config.cdi_spec;
	report.details["driver_root_fs"] = stats.fstype;
	report.details["unchanged"] = stats.unchanged;
	report.details["files"] = stats.files;
	report.details["links"] = stats.links;
	report.facts.files_copied = stats.files_copied;
	report.facts.files_reused = stats.files_reused;
	report.facts.bytes_copied = stats.bytes_copied;
	report.facts.bytes_reused = stats.bytes_reused;
	report.details["stale_trees_removed"] = stats.stale_trees_removed;
	report.details["stale_trees_kept"] = stats.stale_trees_kept;
	report.details["copy_threads"] = stats.copy_threads;
	// On tmpfs the root is memory the machine no longer has for pods: say how much.
	if (stats.fstype == "tmpfs")
		report.facts.driver_root_ram_bytes = stats.bytes_copied + stats.bytes_reused;
	else
		warn(report, {"Driver root " + ctx.config.driver_root + " is on " + stats.fstype + ", expected tmpfs"});
	note_stale_trees_removed(stats.stale_trees_removed);
}

void note_stale_trees_removed(std::size_t removed)
{
	if (removed)
		log::notice("Removed " + std::to_string(removed) + " temporary tree(s) left by an interrupted run.");
}

// Whether the run left every file as it found it: the root unchanged, no spec written, no /dev/char
// link made or removed (what execute*.cpp records in the report's facts).
static bool nothing_written(const Report &report, const InstallStats &stats) { return stats.unchanged && !report.facts.files_changed; }

// The last word of a run that built (or kept unchanged) the root: one line for the journal,
// `systemctl status` and the host.
int finish_ready(const Context &ctx, Report &report, const DriverSet &driver, const InstallStats &stats, const SpecForState &cdi,
		 std::chrono::steady_clock::time_point total_start)
{
	const Config &cfg = ctx.config;
	const auto total = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - total_start);
	const std::uint64_t root_bytes = stats.bytes_copied + stats.bytes_reused;
	const std::size_t migs = cdi.devices.mig_devices();
	report.outcome = "ready";
	std::string fabric;  // " (and nvidia.com/nvswitch, nvidia.com/gds)"
	for (const auto &[kind, spec] : cdi.fabric)
		fabric += (fabric.empty() ? " (and " : ", ") + std::string(kind);
	if (!fabric.empty())
		fabric += ")";
	std::string summary = "Driver " + driver.version + " ready in " + cfg.driver_root + ": " +
			      std::to_string(stats.files) + " files, " +
			      (stats.unchanged ? std::string("unchanged")
					       : std::to_string(stats.files_copied) + " copied (" + format_bytes(stats.bytes_copied) +
							 "), " + std::to_string(stats.files_reused) + " reused") +
			      (stats.fstype == "tmpfs" ? ", " + format_bytes(root_bytes) + " of RAM (tmpfs)" : std::string()) +
			      ", " + std::to_string(cdi.devices.gpus.size()) + " GPU(s)" +
			      (migs ? " with " + std::to_string(migs) + " MIG device(s)" : std::string()) +
			      (cdi.devices.imex_channels.empty() ? std::string() : " and " + std::to_string(cdi.devices.imex_channels.size()) + " IMEX channel(s)") + " in " +
			      cfg.cdi_spec + fabric + ", " + format_ms(total) + ".";
	notify_status(summary);
	// A refresh that changed nothing (the timer's, every refresh.interval on every node): said at
	// debug level, with no MESSAGE_ID, so the journal and a fleet's queries keep the runs that did
	// something (290 identical entries a day per node).
	if (report.command == "refresh" && nothing_written(report, stats)) {
		log::debug(summary);
		return EXIT_READY;
	}
	log::info(summary, {{"MESSAGE_ID", message_id::SETUP_READY},
			    {"UNBOUNDED_NVIDIA_DRIVER_VERSION", driver.version},
			    {"UNBOUNDED_NVIDIA_DRIVER_ROOT", cfg.driver_root},
			    {"UNBOUNDED_NVIDIA_FILES", std::to_string(stats.files)},
			    {"UNBOUNDED_NVIDIA_FILES_COPIED", std::to_string(stats.files_copied)},
			    {"UNBOUNDED_NVIDIA_BYTES_COPIED", std::to_string(stats.bytes_copied)},
			    {"UNBOUNDED_NVIDIA_ROOT_BYTES", std::to_string(root_bytes)},
			    {"UNBOUNDED_NVIDIA_DURATION_MS", std::to_string(total.count())}});
	return EXIT_READY;
}

void record_left_out(Report &report, std::vector<LeftOut> left)
{
	std::vector<std::string> warnings;
	for (auto &l : left) {
		report.details["optional_left_out"].push_back(l.path);
		warnings.push_back(std::move(l.warning));
	}
	warn(report, warnings);
}

}  // namespace unbounded
