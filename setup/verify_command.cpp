// `verify`: read-only checks of the live state, for the host's reconcile loop. Waits for a setup run
// in progress (shared lock) so it never judges a half-finished run.
#include "commands.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "cdi_state.hpp"
#include "driver_discovery.hpp"
#include "last_run.hpp"
#include "lock.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "self_repair.hpp"
#include "staged_driver.hpp"
#include "staging_wait.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sys/stat.h>

namespace unbounded {
namespace {

// Where the settings a host may pass as credentials came from (credentials.hpp): what was asked of
// this machine, and by whom, in verify --json.
void report_settings(const Config &cfg, Report &report)
{
	const char *enabled = cfg.enabled == Enabled::Auto ? "auto" : cfg.enabled == Enabled::Yes ? "true"
												  : "false";
	const auto origin = [&](const char *key) { return cfg.origins.count(key) ? cfg.origins.at(key) : std::string("default"); };
	auto &s = report.details["settings"];
	s["enabled"] = {{"value", enabled}, {"from", origin("enabled")}};
	s["expected_gpus"] = {{"value", cfg.expected_gpus ? nlohmann::json(*cfg.expected_gpus) : nlohmann::json()}, {"from", origin("expected_gpus")}};
	s["gpus"] = {{"value", cfg.assigned_gpus}, {"from", origin("gpus")}};
}

// What the last setup or refresh warned about, from its status.json (ours, in our run directory): a
// host's reconcile loop reads verify, not setup's stderr, and "ready" must not hide that nvidia-smi
// or the GSP firmware is missing. Only a file nobody else could have written is believed.
void carry_last_run(const Context &ctx, Report &report)
{
	const std::string display = std::string(RUN_DIR) + "/status.json";
	auto dir = fs::open_dir(ctx.real(RUN_DIR));
	if (!dir)
		return;
	auto read = fs::read_trusted_at(dir->get(), RUN_DIR, "status.json", display, 4u << 20);
	if (!read) {
		// No run directory we trust, or no setup has run yet: nothing to carry. A status.json
		// someone else could have written is said.
		if (read.error().step == fs::TrustedStep::File)
			report.warnings.push_back(read.error().error.message + ", not reading the last run's warnings");
		return;
	}
	auto parsed = parse_last_run(read->text, display);
	if (!parsed)
		return;
	for (const auto &msg : parsed->warnings)
		if (std::find(report.warnings.begin(), report.warnings.end(), msg) == report.warnings.end())
			report.warnings.push_back(msg);
	struct stat st = {};
	nlohmann::ordered_json last{{"command", parsed->command}, {"outcome", parsed->outcome}, {"warnings", parsed->warnings.size()}};
	if (::fstat(read->fd.get(), &st) == 0)  // the text's file
		last["finished_unix"] = st.st_mtim.tv_sec;
	report.details["last_run"] = std::move(last);
}

// What the consumer check takes from one of our specs as verify read it: what the plan says when the
// bytes are the planned spec's (the usual case, no parse), else what the bytes say.
std::optional<SpecFacts> facts_as_read(const std::string &text, const std::string &path, const CdiSpec *planned)
{
	if (planned && text == planned->yaml)
		return spec_facts(*planned);
	return spec_facts(text, path);
}

// Our specs as verify read them, for the consumer check (which then does not read them again).
KnownSpecs specs_as_read(const Context &ctx, const RunSnapshot &snap, const std::optional<SpecForState> &planned)
{
	KnownSpecs known;
	if (snap.cdi_spec.text)
		known[ctx.config.cdi_spec] = facts_as_read(*snap.cdi_spec.text, ctx.config.cdi_spec, planned ? &planned->spec : nullptr);
	for (const auto &[side, read] : snap.sides)
		if (read.text)
			known[*side.path] = facts_as_read(*read.text, *side.path, planned ? planned->side(side.kind) : nullptr);
	return known;
}

// Whether a live state without problems is all there is: the host's staging, beside the live driver
// `version`, sets the outcome; returns what the ready line adds about it.
std::string judge_staging(const Context &ctx, Report &report, const RunSnapshot &snap, const StagingState &staging,
			  const std::string &version)
{
	if (!staging.nvidia_machine || staging.usable.empty()) {
		report.outcome = "staging-gone";
		report.problems.push_back(Problem{ctx.config.staging, "The host's staging mounts under " + ctx.config.staging +
									      " are gone: driver " + version + " stays live, but no refresh can follow the host"});
		return {};
	}
	// The memo is read, never written: verify changes nothing.
	auto run_dir = fs::open_dir(ctx.real(RUN_DIR));
	const StagedDriver staged = discover_staged(ctx, staging, run_dir ? run_dir->get() : -1, snap.module.version, /*keep_memo=*/false);
	if (!staged.driver) {
		report.outcome = "staging-inconsistent";
		report.details["staging_error"] = staged.error.message;
		report.warnings.push_back(staged.error.message);
		return " (staging is inconsistent: " + staged.error.message + ")";
	}
	if (staged.driver->version != version) {
		const std::string &v = staged.driver->version;
		report.outcome = "pending-host-reboot";
		report.facts.staged_driver_version = v;
		return " (the host staged " + v + ", which goes live once the kernel module is " + v + ")";
	}
	report.outcome = "ready";
	return {};
}

// No staging and no driver root: a machine without NVIDIA GPUs (nothing to verify), or one configured
// with GPUs whose host bound nothing (broken, not a CPU node). nullopt: there is a driver to verify.
std::optional<int> verify_without_driver(const Context &ctx, Report &report, const StagingState &staging)
{
	struct stat st = {};
	if (staging.nvidia_machine || ::lstat(ctx.real(ctx.config.driver_root).c_str(), &st) == 0)
		return std::nullopt;
	if (!configured_gpu_machine(ctx.config).empty()) {
		report.outcome = "staging-gone";
		report.problems.push_back(Problem{ctx.config.staging, nothing_bound_message(ctx.config)});
		log::error("Not ready: " + report.problems.back().message,
			   {{"MESSAGE_ID", message_id::STAGING_GONE}, {"UNBOUNDED_NVIDIA_PATH", ctx.config.staging}});
		return EXIT_NOT_READY;
	}
	report.outcome = "no-gpu";
	log::info("Not an NVIDIA machine and no driver root: nothing to verify.");
	return EXIT_READY;
}

}  // namespace

std::optional<Problem> check_device_plugin(const Context &ctx, const SpecRead &spec, const std::string &driver_version)
{
	const std::string &path = ctx.config.device_plugin_spec;
	std::optional<Problem> wiring;  // generated from another root: a restart writes the same spec again
	auto details = verify_device_plugin_spec(ctx, spec, driver_version, &wiring);
	if (wiring)
		return wiring;
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
	if (auto rc = verify_without_driver(ctx, report, staging))
		return *rc;
	// Read once: the checks, the consumer check and the look at staging take what it holds.
	const RunSnapshot snap = [&] {
		PhaseTimer t(report, "snapshot");
		return take_snapshot(ctx, /*learn_hook=*/false);
	}();
	std::optional<SpecForState> planned;
	report.problems = check_live_state(ctx, report, snap, planned);
	// Fewer GPUs than expected_gpus: setup served those there are; verify says so, so that a GPU
	// that fell off the bus after a host reboot does not go unnoticed.
	bool gpus_missing = false;
	if (report.facts.gpu_shortfall) {
		gpus_missing = report.problems.empty();
		report.problems.push_back(Problem{"/proc/driver/nvidia/gpus", *report.facts.gpu_shortfall});
	}
	carry_last_run(ctx, report);
	report_settings(ctx.config, report);
	const std::string version = report.facts.driver_version.value_or("");
	report.details["device_plugin_spec"] = ctx.config.device_plugin_spec;
	// The snapshot outlives the consumer check below: its bytes are lent, not copied (2 MiB at most).
	report.device_plugin_read = ReadSpecFile{ctx.config.device_plugin_spec,
						 std::shared_ptr<const Result<std::string>>(&snap.device_plugin.text, [](const Result<std::string> *) {})};
	if (!version.empty())
		if (auto p = check_device_plugin(ctx, snap.device_plugin, version)) {
			log::error(p->message, {{"MESSAGE_ID", message_id::DEVICE_PLUGIN_SPEC_STALE}, {"UNBOUNDED_NVIDIA_PATH", p->path}});
			report.problems.push_back(std::move(*p));
		}
	// What containerd will do with the specs: a right root and spec serve no pod when CDI is off.
	const KnownSpecs known = specs_as_read(ctx, snap, planned);
	const std::vector<Problem> consumer = record_consumer(ctx, report, /*verify=*/true, &known);
	report.problems.insert(report.problems.end(), consumer.begin(), consumer.end());
	// The units this all exists for: a right root and spec serve no pod while containerd is down.
	const std::vector<Problem> units = check_protected_units(ctx, report);
	report.problems.insert(report.problems.end(), units.begin(), units.end());
	// The pods that read the root once: restarted after a change, and back on the new one.
	const std::vector<Problem> consumers = check_consumers_followed(ctx, report);
	report.problems.insert(report.problems.end(), consumers.begin(), consumers.end());
	// What the host has staged, beside what is live: a refresh keeps a root the module still needs.
	const std::string staged_note = report.problems.empty() ? judge_staging(ctx, report, snap, staging, version) : std::string();
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
