#include "metrics_report.hpp"

#include "metrics.hpp"

namespace unbounded {

std::string setup_metrics_text(const Report &report, double now_seconds, double duration_seconds, double refresh_interval_seconds,
			       double held_back_units)
{
	const RunFacts &f = report.facts;
	auto n = [](const auto &value) { return value ? static_cast<double>(*value) : 0.0; };
	MetricsText m;
	m.gauge("unbounded_nvidia_ready", "1 when the driver root and CDI spec serve GPU pods (or there is no GPU)", report.ready() ? 1 : 0);
	m.gauge("unbounded_nvidia_outcome_info", "Outcome of the last setup, refresh or cleanup", 1,
		{{"command", report.command}, {"outcome", report.outcome}});
	m.gauge("unbounded_nvidia_held_back_units",
		"Units (containerd, kubelet) a failed boot setup holds back until a refresh finds the driver ready", held_back_units);
	m.gauge("unbounded_nvidia_pending_host_reboot", "1 when the host staged a driver the loaded kernel module does not run yet",
		report.outcome == "pending-host-reboot" ? 1 : 0);
	if (f.driver_version && !f.driver_version->empty())
		m.gauge("unbounded_nvidia_driver_info", "Driver versions: live root, kernel module, staged by the host", 1,
			{{"driver_version", *f.driver_version},
			 {"kernel_module_version", f.kernel_module_version.value_or("")},
			 {"staged_driver_version", f.staged_driver_version.value_or("")}});
	m.gauge("unbounded_nvidia_last_run_timestamp_seconds", "When the last run ended (Unix time)", now_seconds);
	m.gauge("unbounded_nvidia_last_run_duration_seconds", "How long the last run took", duration_seconds);
	if (refresh_interval_seconds > 0)
		m.gauge("unbounded_nvidia_refresh_interval_seconds", "How often the refresh timer runs (refresh.interval)", refresh_interval_seconds);
	m.gauge("unbounded_nvidia_last_run_copied_files", "Driver files the last run copied", n(f.files_copied));
	m.gauge("unbounded_nvidia_last_run_reused_files", "Driver files the last run reused from the live root", n(f.files_reused));
	m.gauge("unbounded_nvidia_last_run_copied_bytes", "Bytes the last run copied", n(f.bytes_copied));
	m.gauge("unbounded_nvidia_last_run_reused_bytes", "Bytes the last run reused from the live root", n(f.bytes_reused));
	if (f.driver_root_ram_bytes)
		m.gauge("unbounded_nvidia_driver_root_ram_bytes", "Memory the driver root takes on tmpfs", n(f.driver_root_ram_bytes));
	m.gauge("unbounded_nvidia_gpus", "GPUs in the CDI spec", n(f.gpus));
	if (f.driver_root_generation)
		m.gauge("unbounded_nvidia_driver_root_generation",
			"What the GPU consumers see (driver, GPUs, MIG, IMEX), numbered from 1 at each machine start; consumers restart when it moves",
			n(f.driver_root_generation));
	m.gauge("unbounded_nvidia_cdi_devices", "Devices in the CDI spec", n(f.cdi_devices));
	m.gauge("unbounded_nvidia_warnings", "Warnings of the last run (verify --json lists them)", static_cast<double>(report.warnings.size()));
	for (const auto &[check, count] : f.consumer_findings)
		m.gauge("unbounded_nvidia_consumer_findings", "What keeps containerd from giving pods our devices, by check (verify --json says which file)",
			static_cast<double>(count), {{"check", check}});
	if (f.dra_claim_specs)
		m.gauge("unbounded_nvidia_dra_claim_specs", "The DRA driver's per-claim CDI specs on this machine", n(f.dra_claim_specs));
	if (f.expected_gpus) {
		const double expected = n(f.expected_gpus), offered = n(f.gpus);
		m.gauge("unbounded_nvidia_expected_gpus", "GPUs this machine should see (expected_gpus)", expected);
		m.gauge("unbounded_nvidia_gpus_missing", "GPUs short of expected_gpus", expected > offered ? expected - offered : 0);
	}
	return m.text();
}

}  // namespace unbounded
