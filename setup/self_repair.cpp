#include "self_repair.hpp"

#include "fs.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "state_format.hpp"

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace unbounded {
namespace {

constexpr const char *SETUP_UNIT = "unbounded-nvidia-setup.service";
constexpr const char *REFRESH_HINT = "a refresh that finds the driver ready starts it (unbounded-nvidia-refresh.path when "
				     "staging changes, the timer, or the host: systemctl start unbounded-nvidia-refresh.service)";

std::uint64_t now_usec()
{
	return static_cast<std::uint64_t>(
		std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::string joined(const std::vector<std::string> &units)
{
	std::string s;
	for (std::size_t i = 0; i < units.size(); i++)
		s += (i == 0 ? "" : i + 1 == units.size() ? " and "
							  : ", ") +
		     units[i];
	return s;
}

// held-back.json in the run directory, which the setup that failed writes and the refresh that
// starts what it names removes.
void write_held_back(const Context &ctx, const std::vector<std::string> &units)
{
	const nlohmann::ordered_json doc{{"format", STATE_FORMAT}, {"units", units}, {"recorded_usec", now_usec()}};
	const std::string display = std::string(RUN_DIR) + "/" + HELD_BACK_FILE;
	if (auto dir = fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR); !dir)
		log::warning(dir.error().message + ", not recording the units setup held back");
	else if (auto w = fs::write_file_atomic_at(dir->get(), HELD_BACK_FILE, display, doc.dump() + "\n",
						   {.mode = 0644, .fsync = false, .skip_if_unchanged = false});
		 !w)
		log::warning(w.error().message + ", not recording the units setup held back");
}

struct HeldBack {
	std::vector<std::string> units;
	std::uint64_t recorded_usec = 0;
};

// The record, when there is one we wrote: a file in our private run directory, root's, bounded.
// `quiet`: for the metrics, which count it; what is wrong with it is said where it is acted on.
std::optional<HeldBack> read_held_back(const Context &ctx, bool quiet = false)
{
	const auto warn = [quiet](const std::string &msg) {
		if (!quiet)
			log::warning(msg);
	};
	auto dir = fs::open_dir(ctx.real(RUN_DIR));
	if (!dir)
		return std::nullopt;
	const std::string display = std::string(RUN_DIR) + "/" + HELD_BACK_FILE;
	auto read = fs::read_trusted_at(dir->get(), RUN_DIR, HELD_BACK_FILE, display, 64 * 1024);
	if (!read) {
		if (read.error().step == fs::TrustedStep::File || read.error().step == fs::TrustedStep::Read)
			warn(read.error().error.message + ", not starting what it names");
		return std::nullopt;
	}
	auto doc = nlohmann::json::parse(read->text, nullptr, false);
	if (doc.is_object() && doc["format"].is_number_integer())
		if (auto newer = newer_state_format(doc["format"].get<long long>(), display)) {
			warn(*newer + ", not starting what it names");
			return std::nullopt;
		}
	HeldBack h;
	if (doc.is_object() && doc["units"].is_array() && doc["recorded_usec"].is_number_unsigned()) {
		h.recorded_usec = doc["recorded_usec"].get<std::uint64_t>();
		// Only the units the generator protects, whatever the file says.
		for (const char *unit : PROTECTED_UNITS)
			for (const auto &u : doc["units"])
				if (u.is_string() && u.get<std::string>() == unit)
					h.units.push_back(unit);
	}
	if (h.units.empty()) {
		warn(display + " is not a record of held-back units, ignoring it");
		return std::nullopt;
	}
	return h;
}

}  // namespace

std::size_t held_back_count(const Context &ctx)
{
	auto record = read_held_back(ctx, /*quiet=*/true);
	return record ? record->units.size() : 0;
}

void note_held_back(const Context &ctx, Report &report)
{
	std::string why;
	auto units = unit_manager_or_why(ctx, why);
	if (!units) {
		if (!ctx.root.empty())
			return;
		log::warning("Failed to ask the service manager which units wait for this setup: " + why +
			     "; a refresh cannot start them once the driver is ready");
		return;
	}
	std::vector<std::string> waiting;
	for (const char *unit : PROTECTED_UNITS) {
		auto s = units->state(unit);
		if (!s) {
			log::warning(s.error().message);
			continue;
		}
		if (s->job_type == "start" && !unit_running(s->active_state))
			waiting.push_back(unit);
	}
	if (waiting.empty())
		return;
	report.details["held_back"] = waiting;
	write_held_back(ctx, waiting);
	log::notice(joined(waiting) + (waiting.size() == 1 ? " waits" : " wait") +
		    " for this setup and will not start now; a refresh that finds the driver ready starts " +
		    (waiting.size() == 1 ? "it" : "them") + ", nobody needs to.");
}

void start_held_back(const Context &ctx, Report &report)
{
	auto record = read_held_back(ctx);
	if (!record)
		return;
	std::string why;
	auto units = unit_manager_or_why(ctx, why);
	if (!units) {
		log::warning("The boot's setup held back " + joined(record->units) + ", but the service manager cannot be asked: " + why);
		return;
	}
	// Removed first: a start pulls setup in again, and a setup that fails again records anew.
	clear_held_back(ctx);
	std::vector<std::string> started;
	const Millis setup_budget = ctx.config.staging_timeout + Millis(240'000);
	for (const std::string &unit : record->units) {
		auto s = units->state(unit);
		if (!s) {
			log::warning(s.error().message + ", not starting it");
			continue;
		}
		if (!s->installed() || s->load_state == "masked")
			continue;
		if (unit_running(s->active_state) || s->job_type == "start")
			continue;  // someone started it already
		if (s->active_enter_usec > record->recorded_usec) {
			log::notice(unit + " ran after setup held it back and was stopped since: leaving it stopped.");
			continue;
		}
		auto r = units->start(unit, unit == PROTECTED_UNITS[0] ? setup_budget : Millis(120'000));
		if (!r) {
			log::error("Failed to start " + unit + ", which the failed boot setup held back: " + r.error().message,
				   {{"MESSAGE_ID", message_id::SELF_REPAIR_FAILED}, {"UNIT", unit}});
			report.warnings.push_back("Failed to start " + unit + ": " + r.error().message);
			// Our setup failed again (it recorded what waited then): keep the rest for the next refresh.
			auto setup = units->state(SETUP_UNIT);
			if (setup && setup->active_state == "failed") {
				write_held_back(ctx, record->units);
				break;
			}
			continue;
		}
		started.push_back(unit);
	}
	if (started.empty())
		return;
	report.details["started_after_failed_boot"] = started;
	log::notice("The driver root is ready now: started " + joined(started) + ", which the failed boot setup had held back.",
		    {{"MESSAGE_ID", message_id::SELF_REPAIRED}, {"UNBOUNDED_NVIDIA_UNITS", joined(started)}});
}

std::vector<Problem> check_protected_units(const Context &ctx, Report &report)
{
	std::string why;
	auto units = unit_manager_or_why(ctx, why);
	nlohmann::ordered_json states = nlohmann::ordered_json::object();
	std::vector<Problem> problems;
	if (!units) {
		report.details["units"] = has_unit_manager(ctx) ? why : "not checked: " + why;
		if (ctx.root.empty())
			report.warnings.push_back("Could not ask the service manager about containerd and kubelet: " + why);
		return problems;
	}
	const bool held_back = read_held_back(ctx).has_value();
	for (const char *unit : PROTECTED_UNITS) {
		auto s = units->state(unit);
		if (!s) {
			report.warnings.push_back(s.error().message);
			states[unit] = "unknown";
			continue;
		}
		if (!s->installed()) {
			states[unit] = "not installed";
			continue;
		}
		states[unit] = s->active_state;
		if (s->active_state == "active" || s->active_state == "reloading")
			continue;
		const std::string state = s->active_state + " (" + s->sub_state + ")";
		std::string what;
		if (s->active_state == "activating" || s->job_type == "start")
			what = "it is starting";
		else if (held_back)
			what = "the boot's setup failed and held it back; " + std::string(REFRESH_HINT);
		else if (s->active_state == "failed")
			what = "it failed by itself; see systemctl status " + std::string(unit);
		else
			what = "nothing will start it (stopped on purpose?): systemctl start " + std::string(unit);
		problems.push_back(Problem{unit, std::string(unit) + " is " + state + ", so GPU pods cannot run: " + what});
	}
	report.details["units"] = std::move(states);
	return problems;
}

void clear_held_back(const Context &ctx)
{
	auto dir = fs::open_dir(ctx.real(RUN_DIR));
	if (dir && ::unlinkat(dir->get(), HELD_BACK_FILE, 0) < 0 && errno != ENOENT)
		log::warning(last_errno_error("Failed to remove " + std::string(RUN_DIR) + "/" + HELD_BACK_FILE).message);
}

}  // namespace unbounded
