// `verify`: read-only checks of the live state, for the host's reconcile loop. Waits for a setup run
// in progress (shared lock) so it never judges a half-finished run.
#include "commands.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "cdi_state.hpp"
#include "driver_discovery.hpp"
#include "kernel_module.hpp"
#include "last_run.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "staged_driver.hpp"
#include "spec_marker.hpp"
#include "staging_wait.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sys/stat.h>

namespace unbounded {
namespace {

// Each side spec (IMEX channels, NVSwitch, GDRCopy, GDS) exists exactly while the machine has its
// devices, and is checked like ours. When the devices could not be read (`current` null), a spec of
// ours that is there is still checked.
std::vector<Problem> check_side_spec(const Context &ctx, const SideSpec &side, const SpecForState *current)
{
	const std::string &path = *side.path;
	if (const CdiSpec *spec = current ? current->side(side.kind) : nullptr)
		return verify_cdi_spec(ctx, path, "", spec, side.kind);
	if (!file_is_our_spec(ctx.real(path)))
		return {};
	if (current)
		return {Problem{path, path + " is stale: it offers " + side.what + " but the machine has none (a setup or refresh removes it)"}};
	return verify_cdi_spec(ctx, path, "", nullptr, side.kind);
}

// What the last setup or refresh warned about, from its status.json (ours, in our run directory): a
// host's reconcile loop reads verify, not setup's stderr, and "ready" must not hide that nvidia-smi
// or the GSP firmware is missing. Only a file nobody else could have written is believed.
void carry_last_run(const Context &ctx, Report &report)
{
	const std::string display = std::string(RUN_DIR) + "/status.json";
	auto dir = fs::open_dir(ctx.real(RUN_DIR));
	if (!dir || !fs::check_trusted(dir->get(), RUN_DIR, /*directory=*/true))
		return;
	auto fd = fs::open_regular_at(dir->get(), "status.json", display);
	if (!fd)
		return;  // no setup has run yet
	if (auto r = fs::check_trusted(fd->get(), display, /*directory=*/false); !r) {
		report.warnings.push_back(r.error().message + ", not reading the last run's warnings");
		return;
	}
	auto text = fs::read_fd(fd->get(), display, 4u << 20);
	if (!text)
		return;
	auto parsed = parse_last_run(*text, display);
	if (!parsed)
		return;
	for (const auto &msg : parsed->warnings)
		if (std::find(report.warnings.begin(), report.warnings.end(), msg) == report.warnings.end())
			report.warnings.push_back(msg);
	struct stat st{};
	nlohmann::ordered_json last{{"command", parsed->command}, {"outcome", parsed->outcome}, {"warnings", parsed->warnings.size()}};
	if (::fstat(fd->get(), &st) == 0)
		last["finished_unix"] = st.st_mtim.tv_sec;
	report.details["last_run"] = std::move(last);
}

}  // namespace

std::vector<Problem> check_live_state(const Context &ctx, Report &report, const KnownState *known)
{
	const Config &cfg = ctx.config;
	std::vector<Problem> problems;
	Manifest manifest;
	bool manifest_is_known = false;
	if (known && known->root_checked && known->manifest) {
		manifest = *known->manifest;
		manifest_is_known = true;
	} else {
		PhaseTimer t(report, "verify_driver_root");
		problems = verify_driver_root(RootLocation{ctx.real(cfg.driver_root), cfg.driver_root}, &manifest,
					      known ? known->manifest : nullptr, &manifest_is_known);
	}
	report.details["driver_root"] = cfg.driver_root;
	report.details["driver_version"] = manifest.driver_version;
	if (manifest.driver_version.empty())
		return problems;  // no usable root: nothing else can be right

	if (auto kv = read_kernel_module(ctx).version; kv && *kv != manifest.driver_version)
		problems.push_back(Problem{PROC_DRIVER_VERSION,
					   "Kernel module is " + *kv + " but the driver root holds " + manifest.driver_version +
						   ": start unbounded-nvidia-refresh.service to rebuild it (containerd keeps running)"});

	PhaseTimer t(report, "verify_cdi");
	const CdiSpec *expected = nullptr;
	const SpecForState *current = nullptr;  // what the specs should be now, when the devices could be read
	Result<SpecForState> state = fail(Error{});
	if (known && known->cdi && manifest_is_known) {
		expected = &known->cdi->spec;
		current = known->cdi;
	} else {
		state = spec_for_state(ctx, manifest);
		if (!state) {
			problems.push_back(Problem{"/dev", state.error().message});
		} else {
			expected = &state->spec;
			current = &*state;
			if (auto shortfall = gpu_shortfall(cfg.expected_gpus, state->devices))
				report.details["gpu_shortfall"] = *shortfall;
			report.details["gpus"] = state->devices.gpus.size();
			report.details["mig_devices"] = state->devices.mig_devices();
			report.details["imex_channels"] = state->devices.imex_channels.size();
			report.details["cdi_version"] = state->spec.cdi_version;
			report.details["cdi_devices"] = state->spec.devices;
			report.details["cdi_mounts"] = state->spec.mounts;
		}
	}
	report.details["cdi_spec"] = cfg.cdi_spec;
	for (auto &p : verify_cdi_spec(ctx, cfg.cdi_spec, manifest.driver_version, expected))
		problems.push_back(std::move(p));
	for (const auto &side : side_specs(cfg))
		for (auto &p : check_side_spec(ctx, side, current))
			problems.push_back(std::move(p));
	return problems;
}

std::optional<Problem> check_device_plugin(const Context &ctx, const std::string &driver_version)
{
	const std::string &path = ctx.config.device_plugin_spec;
	auto details = verify_device_plugin_spec(ctx, path, driver_version);
	if (details.empty())
		return std::nullopt;
	// A spec naming files of another driver, after a refresh swapped the root, is the usual case.
	// It stays where it is: it is the plugin's file, and containers that use it fail fast on the
	// missing hostPath, naming it. Only the plugin can write a current one, when it restarts.
	std::string what;
	constexpr std::size_t SHOWN = 4;  // the budget's three failures, and where it stopped
	for (std::size_t i = 0; i < details.size() && i < SHOWN; i++)
		what += (i ? "; " : "") + details[i].message;
	if (details.size() > SHOWN)
		what += " (and " + std::to_string(details.size() - SHOWN) + " more)";
	return Problem{path, "The NVIDIA device plugin's CDI spec does not match driver " + driver_version + ": " + what +
				     ". Restart the NVIDIA device plugin pod on this node so it writes a current spec"};
}

int run_verify(const Context &ctx, Report &report)
{
	report.command = "verify";
	std::optional<RunLock> lock;
	{
		PhaseTimer t(report, "lock");
		lock = RunLock::wait_shared(ctx.real(std::string(RUN_DIR) + "/lock"), std::chrono::minutes(2));
	}
	StagingState staging = probe_staging(ctx);
	struct stat st{};
	if (!staging.nvidia_machine && ::lstat(ctx.real(ctx.config.driver_root).c_str(), &st) < 0) {
		report.outcome = "no-gpu";
		log::info("Not an NVIDIA machine and no driver root: nothing to verify.");
		return EXIT_READY;
	}
	report.problems = check_live_state(ctx, report);
	// Fewer GPUs than expected_gpus: setup served those there are; verify says so, so that a GPU
	// that fell off the bus after a host reboot does not go unnoticed.
	bool gpus_missing = false;
	if (auto it = report.details.find("gpu_shortfall"); it != report.details.end()) {
		gpus_missing = report.problems.empty();
		report.problems.push_back(Problem{"/proc/driver/nvidia/gpus", it->get<std::string>()});
		report.details.erase("gpu_shortfall");
	}
	carry_last_run(ctx, report);
	const std::string version = report.details["driver_version"].get<std::string>();
	report.details["device_plugin_spec"] = ctx.config.device_plugin_spec;
	if (!version.empty())
		if (auto p = check_device_plugin(ctx, version)) {
			log::error(p->message, {{"MESSAGE_ID", message_id::DEVICE_PLUGIN_SPEC_STALE}, {"UNBOUNDED_NVIDIA_PATH", p->path}});
			report.problems.push_back(std::move(*p));
		}
	// What containerd will do with the specs: a right root and spec serve no pod when CDI is off.
	const std::vector<Problem> consumer = record_consumer(ctx, report, /*verify=*/true);
	report.problems.insert(report.problems.end(), consumer.begin(), consumer.end());
	// What the host has staged, beside what is live: a refresh keeps a root the module still needs.
	std::string staged_note;
	if (report.problems.empty()) {
		if (!staging.nvidia_machine || staging.usable.empty()) {
			report.outcome = "staging-gone";
			report.problems.push_back(Problem{ctx.config.staging, "The host's staging mounts under " + ctx.config.staging +
										  " are gone: driver " + version + " stays live, but no refresh can follow the host"});
		} else {
			// The memo is read, never written: verify changes nothing.
			auto run_dir = fs::open_dir(ctx.real(RUN_DIR));
			const StagedDriver staged = discover_staged(ctx, staging, run_dir ? run_dir->get() : -1,
								    read_kernel_module(ctx).version, /*save=*/false);
			if (!staged.driver) {
				report.outcome = "staging-inconsistent";
				report.details["staging_error"] = staged.error.message;
				report.warnings.push_back(staged.error.message);
				staged_note = " (staging is inconsistent: " + staged.error.message + ")";
			} else if (staged.driver->version != version) {
				const std::string &v = staged.driver->version;
				report.outcome = "pending-host-reboot";
				report.details["staged_driver_version"] = v;
				staged_note = " (the host staged " + v + ", which goes live once the kernel module is " + v + ")";
			} else {
				report.outcome = "ready";
			}
		}
	}
	if (report.problems.empty()) {
		log::info("Ready: driver " + version + " in " + ctx.config.driver_root + ", " + ctx.config.cdi_spec +
			  " current, every hostPath present" + staged_note + ".");
		return EXIT_READY;
	}
	if (report.outcome.empty() || (gpus_missing && report.problems.size() == 1))
		report.outcome = gpus_missing && report.problems.size() == 1 ? "gpus-missing" : "not-ready";
	for (const auto &p : report.problems)
		if (p.path != ctx.config.device_plugin_spec &&
		    std::none_of(consumer.begin(), consumer.end(), [&](const Problem &c) { return c.message == p.message; }))
			log::error("Not ready: " + p.message, {{"MESSAGE_ID", message_id::VERIFY_FAILED}, {"UNBOUNDED_NVIDIA_PATH", p.path}});
	return EXIT_NOT_READY;
}

}  // namespace unbounded
