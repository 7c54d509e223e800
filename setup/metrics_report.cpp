#include "metrics_report.hpp"

#include "metrics.hpp"

namespace unbounded {
namespace {

double number_of(const nlohmann::ordered_json &details, const char *key)
{
	auto it = details.find(key);
	return it != details.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string string_of(const nlohmann::ordered_json &details, const char *key)
{
	auto it = details.find(key);
	return it != details.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string setup_metrics_text(const Report &report, double now_seconds, double duration_seconds, double refresh_interval_seconds,
			       double held_back_units)
{
	const auto &d = report.details;
	MetricsText m;
	m.gauge("unbounded_nvidia_ready", "1 when the driver root and CDI spec serve GPU pods (or there is no GPU)", report.ready() ? 1 : 0);
	m.gauge("unbounded_nvidia_outcome_info", "Outcome of the last setup, refresh or cleanup", 1,
		{{"command", report.command}, {"outcome", report.outcome}});
	m.gauge("unbounded_nvidia_held_back_units",
		"Units (containerd, kubelet) a failed boot setup holds back until a refresh finds the driver ready", held_back_units);
	m.gauge("unbounded_nvidia_pending_host_reboot", "1 when the host staged a driver the loaded kernel module does not run yet",
		report.outcome == "pending-host-reboot" ? 1 : 0);
	if (const std::string v = string_of(d, "driver_version"); !v.empty())
		m.gauge("unbounded_nvidia_driver_info", "Driver versions: live root, kernel module, staged by the host", 1,
			{{"driver_version", v},
			 {"kernel_module_version", string_of(d, "kernel_module_version")},
			 {"staged_driver_version", string_of(d, "staged_driver_version")}});
	m.gauge("unbounded_nvidia_last_run_timestamp_seconds", "When the last run ended (Unix time)", now_seconds);
	m.gauge("unbounded_nvidia_last_run_duration_seconds", "How long the last run took", duration_seconds);
	if (refresh_interval_seconds > 0)
		m.gauge("unbounded_nvidia_refresh_interval_seconds", "How often the refresh timer runs (refresh.interval)", refresh_interval_seconds);
	m.gauge("unbounded_nvidia_last_run_copied_files", "Driver files the last run copied", number_of(d, "files_copied"));
	m.gauge("unbounded_nvidia_last_run_reused_files", "Driver files the last run reused from the live root", number_of(d, "files_reused"));
	m.gauge("unbounded_nvidia_last_run_copied_bytes", "Bytes the last run copied", number_of(d, "bytes_copied"));
	m.gauge("unbounded_nvidia_last_run_reused_bytes", "Bytes the last run reused from the live root", number_of(d, "bytes_reused"));
	if (d.contains("driver_root_ram_bytes"))
		m.gauge("unbounded_nvidia_driver_root_ram_bytes", "Memory the driver root takes on tmpfs", number_of(d, "driver_root_ram_bytes"));
	m.gauge("unbounded_nvidia_gpus", "GPUs in the CDI spec", number_of(d, "gpus"));
	if (d.contains("driver_root_generation"))
		m.gauge("unbounded_nvidia_driver_root_generation",
			"What the GPU consumers see (driver, GPUs, MIG, IMEX), numbered from 1 at each machine start; consumers restart when it moves",
			number_of(d, "driver_root_generation"));
	m.gauge("unbounded_nvidia_cdi_devices", "Devices in the CDI spec", number_of(d, "cdi_devices"));
	m.gauge("unbounded_nvidia_warnings", "Warnings of the last run (verify --json lists them)", static_cast<double>(report.warnings.size()));
	if (auto it = d.find("consumer_findings"); it != d.end() && it->is_object())
		for (const auto &[check, n] : it->items())
			m.gauge("unbounded_nvidia_consumer_findings",
				"What keeps containerd from giving pods our devices, by check (verify --json says which file)",
				n.is_number() ? n.get<double>() : 0, {{"check", check}});
	if (auto it = d.find("dra_claims"); it != d.end() && it->is_object() && it->contains("claim_specs"))
		m.gauge("unbounded_nvidia_dra_claim_specs", "The DRA driver's per-claim CDI specs on this machine",
			(*it)["claim_specs"].is_number() ? (*it)["claim_specs"].get<double>() : 0);
	if (d.contains("expected_gpus")) {
		const double expected = number_of(d, "expected_gpus"), offered = number_of(d, "gpus");
		m.gauge("unbounded_nvidia_expected_gpus", "GPUs this machine should see (expected_gpus)", expected);
		m.gauge("unbounded_nvidia_gpus_missing", "GPUs short of expected_gpus", expected > offered ? expected - offered : 0);
	}
	return m.text();
}

}  // namespace unbounded
