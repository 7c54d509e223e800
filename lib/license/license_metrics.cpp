#include "license_metrics.hpp"

#include "feature_type.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "metrics.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <utility>

namespace unbounded {
namespace {

constexpr const char *COUNTERS_FILE = "metrics.state";
// A journal cursor is a few hex fields (~150 bytes); anything longer or with other bytes is damage.
constexpr std::size_t MAX_CURSOR = 512;
constexpr const char *CURSOR_CHARS = "0123456789abcdefABCDEFxXsimbt=;";
// The counters' numbers that the file holds as such (whole seconds), by their key.
constexpr std::pair<const char *, double LicenseCounters::*> NUMBERS[] = {
	{"last_applied", &LicenseCounters::last_applied}, {"license_since", &LicenseCounters::license_since}, {"license_expiry", &LicenseCounters::license_expiry}, {"license_rotation", &LicenseCounters::license_rotation}, {"host_btime", &LicenseCounters::host_btime}, {"host_uptime", &LicenseCounters::host_uptime}};
constexpr ReloadOutcome ALL_OUTCOMES[] = {
	ReloadOutcome::Disabled,
	ReloadOutcome::NoSource,
	ReloadOutcome::Unchanged,
	ReloadOutcome::Recorded,
	ReloadOutcome::KnownBad,
	ReloadOutcome::Applied,
	ReloadOutcome::RolledBack,
	ReloadOutcome::Failed,
	ReloadOutcome::Interrupted,
	ReloadOutcome::Installed,
	ReloadOutcome::Verified,
	ReloadOutcome::RebootRequired,
};

const char *license_state_message_id(LicenseState s)
{
	switch (s) {
	case LicenseState::Licensed: return message_id::LICENSE_ACQUIRED;
	case LicenseState::Unlicensed: return message_id::LICENSE_NOT_ACQUIRED;
	case LicenseState::Pending: return message_id::LICENSE_PENDING;
	case LicenseState::Unknown: break;
	}
	return message_id::LICENSE_STATE_UNKNOWN;
}

std::string utc_text(double unix_seconds)
{
	const std::time_t t = static_cast<std::time_t>(unix_seconds);
	std::tm tm{};
	::gmtime_r(&t, &tm);
	char buf[32];
	std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
	return buf;
}

std::string license_state_sentence(const LicenseCounters &c)
{
	const std::string rotation = c.license_rotation > 0 ? " after the rotation applied at " + utc_text(c.license_rotation) : "";
	switch (c.license) {
	case LicenseState::Licensed:
		return "nvidia-gridd holds a license" + rotation +
		       (c.license_expiry > 0 ? ", until " + utc_text(c.license_expiry) : std::string()) + ".";
	case LicenseState::Unlicensed:
		if (c.license_expiry > 0)
			return "nvidia-gridd's license expired at " + utc_text(c.license_expiry) + rotation +
			       " and was not renewed: compute is throttled. Nothing is restarted for this; check the license server.";
		return "nvidia-gridd is running without a license" + rotation +
		       " (it failed to acquire one, or lost it): compute is throttled once the grace period ends. "
		       "Nothing is restarted for this; check the licensing Secret and the license server.";
	case LicenseState::Pending:
		return "nvidia-gridd has started and not yet said whether it holds a license" + rotation + ".";
	case LicenseState::Unknown:
		break;
	}
	return "Whether nvidia-gridd holds a license is unknown: it is not running, or its journal cannot be read.";
}

}  // namespace

std::string LicenseCounters::serialize() const
{
	std::string s;
	for (const auto &[outcome, n] : runs)
		s += "runs " + outcome + " " + std::to_string(static_cast<long long>(n)) + "\n";
	s += "last_applied " + std::to_string(static_cast<long long>(last_applied)) + "\n";
	if (!applied_invocation.empty())
		s += "applied_invocation " + applied_invocation + "\n";
	s += std::string("license ") + license_state_name(license) + "\n";
	s += "license_since " + std::to_string(static_cast<long long>(license_since)) + "\n";
	s += "license_expiry " + std::to_string(static_cast<long long>(license_expiry)) + "\n";
	s += "license_rotation " + std::to_string(static_cast<long long>(license_rotation)) + "\n";
	if (!license_invocation.empty())
		s += "license_invocation " + license_invocation + "\n";
	if (!journal_cursor.empty())
		s += "journal_cursor " + journal_cursor + "\n";
	if (host_btime > 0) {
		s += "host_btime " + std::to_string(static_cast<long long>(host_btime)) + "\n";
		s += "host_uptime " + std::to_string(static_cast<long long>(host_uptime)) + "\n";
		if (licensed_feature >= 0)
			s += "licensed_feature " + std::to_string(licensed_feature) + "\n";
		if (held_feature >= 0)
			s += "held_feature " + std::to_string(held_feature) + "\n";
	}
	return s;
}

LicenseCounters LicenseCounters::parse(std::string_view text)
{
	LicenseCounters c;
	while (!text.empty()) {
		auto nl = text.find('\n');
		const std::string line(text.substr(0, nl));
		text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
		char *end = nullptr;
		if (line.starts_with("runs ")) {
			auto sp = line.rfind(' ');
			const std::string outcome = line.substr(5, sp - 5);
			const double n = std::strtod(line.c_str() + sp + 1, &end);
			for (auto o : ALL_OUTCOMES)  // only names we know: nothing from the file reaches a label
				if (outcome == outcome_name(o) && end && *end == '\0' && n >= 0)
					c.runs[outcome] = n;
		} else if (auto sp = line.find(' '); sp != std::string::npos) {
			const std::string key = line.substr(0, sp), value = line.substr(sp + 1);
			const double t = std::strtod(value.c_str(), &end);
			const bool number = end && *end == '\0' && !value.empty() && std::isfinite(t) && t >= 0;
			for (const auto &[name, member] : NUMBERS)
				if (key == name && number)
					c.*member = t;
			if ((key == "licensed_feature" || key == "held_feature") && number && t <= 1000)
				(key == "licensed_feature" ? c.licensed_feature : c.held_feature) = static_cast<int>(t);
			else if (key == "license")
				c.license = license_state_from_name(value).value_or(LicenseState::Unknown);
			else if ((key == "applied_invocation" || key == "license_invocation") && value.size() == 32 &&
				 value.find_first_not_of("0123456789abcdef") == std::string::npos)
				(key == "applied_invocation" ? c.applied_invocation : c.license_invocation) = value;
			else if (key == "journal_cursor" && !value.empty() && value.size() <= MAX_CURSOR &&
				 value.find_first_not_of(CURSOR_CHARS) == std::string::npos)
				c.journal_cursor = value;  // sd-journal's "s=...;i=...;b=...;m=...;t=...;x=...", nothing else
		}
	}
	return c;
}

bool judge_license_expiry(LicenseCounters &c, double now_seconds)
{
	if (c.license != LicenseState::Licensed || c.license_expiry <= 0 || now_seconds <= c.license_expiry + LICENSE_EXPIRY_MARGIN_S)
		return false;
	c.license = LicenseState::Unlicensed;
	c.license_since = c.license_expiry;
	return true;
}

std::optional<LicenseState> apply_license_view(LicenseCounters &c, const GriddView &view, double now_seconds)
{
	const LicenseObservation &o = view.observation;
	const LicenseState before = c.license;
	const bool new_run = view.invocation_id != c.license_invocation;
	c.license_invocation = view.invocation_id;
	c.journal_cursor = view.journal_cursor;
	// The rotation this state belongs to: the one whose restart began the nvidia-gridd run observed.
	c.license_rotation = !view.invocation_id.empty() && view.invocation_id == c.applied_invocation ? c.last_applied : 0;
	LicenseCounters now = c;
	now.license = o.state;
	now.license_expiry = o.state == LicenseState::Licensed && o.expiry ? static_cast<double>(*o.expiry) : 0;
	now.license_since = o.since_usec ? static_cast<double>(o.since_usec / 1000000) : now_seconds;
	const bool expired = judge_license_expiry(now, now_seconds);
	const bool changed = before != now.license || c.license_since <= 0;
	// An expired license keeps its expiry (the state's cause) only while it is what the state is of.
	c.license = now.license;
	c.license_expiry = now.license == LicenseState::Licensed || expired ? now.license_expiry : 0;
	if (changed || (now.license == LicenseState::Pending && new_run))
		c.license_since = now.license_since;
	if (!changed)
		return std::nullopt;
	return before;
}

std::string license_metrics_text(const LicenseCounters &c, double now_seconds, double reload_interval_seconds)
{
	MetricsText m;
	for (auto o : ALL_OUTCOMES) {
		auto it = c.runs.find(outcome_name(o));
		m.counter("unbounded_nvidia_license_reloads_total", "License reloader runs by outcome", it == c.runs.end() ? 0 : it->second,
			  {{"outcome", outcome_name(o)}});
	}
	m.gauge("unbounded_nvidia_license_last_run_timestamp_seconds", "When the license reloader last ran (Unix time)", now_seconds);
	if (reload_interval_seconds > 0)
		m.gauge("unbounded_nvidia_license_reload_interval_seconds", "How often the license reloader's timer runs (licensing.reload_interval)",
			reload_interval_seconds);
	m.gauge("unbounded_nvidia_license_last_applied_timestamp_seconds",
		"When rotated licensing files were last applied (Unix time, 0 for never)", c.last_applied);
	for (auto s : ALL_LICENSE_STATES)
		m.gauge("unbounded_nvidia_license_state", "Whether nvidia-gridd holds a license, from its journal (1 for the current state)",
			c.license == s ? 1 : 0, {{"state", license_state_name(s)}});
	m.gauge("unbounded_nvidia_license_state_since_seconds", "When the current license state began (Unix time)", c.license_since);
	if (c.license == LicenseState::Licensed && c.license_expiry > 0)
		m.gauge("unbounded_nvidia_license_expiry_timestamp_seconds", "When the license nvidia-gridd holds expires (Unix time)",
			c.license_expiry);
	m.gauge("unbounded_nvidia_license_reboot_required",
		"1 while rotated licensing files ask for another FeatureType than the host's driver holds a license for (applied at its reboot)",
		c.held_feature >= 0 ? 1 : 0);
	if (c.licensed_feature > 0)
		m.gauge("unbounded_nvidia_license_feature_type", "The FeatureType licensed on this boot of the host, and one held back for its reboot",
			c.licensed_feature, {{"which", "licensed"}});
	if (c.held_feature >= 0)
		m.gauge("unbounded_nvidia_license_feature_type", "The FeatureType licensed on this boot of the host, and one held back for its reboot",
			c.held_feature, {{"which", "held_back"}});
	m.gauge("unbounded_nvidia_license_state_rotation_timestamp_seconds",
		"The applied rotation (its last_applied time) whose nvidia-gridd restart the state is of, 0 for none", c.license_rotation);
	return m.text();
}

LicenseCounters read_license_counters(const Context &ctx, int state_fd)
{
	const std::string state_display = fs::join(ctx.config.licensing.state_dir, COUNTERS_FILE);
	if (auto text = fs::read_file_at(state_fd, COUNTERS_FILE, state_display, 64 * 1024))
		return LicenseCounters::parse(*text);
	return {};
}

namespace {

// The feature licensed on this boot of the host (kept for the boot: the driver keeps it), and a
// rotation's FeatureType held back for the host's reboot, with one message when that begins.
void record_feature(const Context &ctx, LicenseCounters &c, ReloadOutcome outcome, bool observed, const std::optional<FeatureChange> &held)
{
	const HostBoot boot = host_boot(ctx);
	if (!boot.known())  // nothing to tell boots apart by: what was recorded stays as it is
		return;
	if (!boot.same_as(c.recorded_boot()))  // the host rebooted: its driver licenses afresh
		c.licensed_feature = c.held_feature = -1;
	c.host_btime = static_cast<double>(boot.btime);
	c.host_uptime = boot.uptime;
	// Only a look at nvidia-gridd on this boot tells: a recorded state may be of the boot before.
	if (observed && c.license == LicenseState::Licensed && c.licensed_feature <= 0)
		if (auto f = installed_feature(ctx); f && *f > 0)
			c.licensed_feature = *f;
	const int before = c.held_feature;
	if (held)
		c.held_feature = held->requested;
	else if (outcome != ReloadOutcome::Failed && outcome != ReloadOutcome::Interrupted)
		c.held_feature = -1;
	if (held && before != held->requested)
		log::warning("Rotated licensing files ask for " + feature_type_text(held->requested) + ", but this host's driver holds a license for " +
				     feature_type_text(held->licensed) + " until it restarts: they are kept back, and " +
				     ctx.config.licensing.gridd_unit + " keeps running, until the host reboots.",
			     {{"MESSAGE_ID", message_id::LICENSE_REBOOT_REQUIRED},
			      {"UNBOUNDED_NVIDIA_LICENSE_FEATURE_TYPE", std::to_string(held->requested)},
			      {"UNBOUNDED_NVIDIA_LICENSED_FEATURE_TYPE", std::to_string(held->licensed)}});
}

}  // namespace

std::optional<int> licensed_feature_this_boot(const Context &ctx, int state_fd)
{
	const LicenseCounters c = read_license_counters(ctx, state_fd);
	if (!host_boot(ctx).same_as(c.recorded_boot()) || c.licensed_feature <= 0)
		return std::nullopt;
	return c.licensed_feature;
}

std::optional<int> installed_feature(const Context &ctx)
{
	const std::string &conf = ctx.config.licensing.gridd_conf_target;
	auto text = fs::read_file(ctx.real(conf), 64 * 1024);
	if (!text)
		return std::nullopt;
	return gridd_feature_type(*text);
}

void record_license_metrics(const Context &ctx, int state_fd, ReloadOutcome outcome, const std::optional<GriddView> &view,
			    const std::optional<FeatureChange> &held)
{
	const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
	const std::string state_display = fs::join(ctx.config.licensing.state_dir, COUNTERS_FILE);
	LicenseCounters c = read_license_counters(ctx, state_fd);
	c.runs[outcome_name(outcome)] += 1;
	if (outcome == ReloadOutcome::Applied) {
		c.last_applied = now;
		c.applied_invocation = view ? view->invocation_id : std::string();
	}
	std::optional<LicenseState> before;
	if (view)
		before = apply_license_view(c, *view, now);
	else if (judge_license_expiry(c, now))  // no look at nvidia-gridd (boot): the clock still counts
		before = LicenseState::Licensed;
	if (before) {
		// Only the state, its times and the rotation's time: never a server, product or token.
		log::Fields fields{{"MESSAGE_ID", license_state_message_id(c.license)},
				   {"UNBOUNDED_NVIDIA_LICENSE_STATE", license_state_name(c.license)},
				   {"UNBOUNDED_NVIDIA_LICENSE_PREVIOUS_STATE", license_state_name(*before)},
				   {"UNBOUNDED_NVIDIA_LICENSE_ROTATION", std::to_string(static_cast<long long>(c.license_rotation))}};
		if (c.license_expiry > 0)
			fields.push_back({"UNBOUNDED_NVIDIA_LICENSE_EXPIRY", std::to_string(static_cast<long long>(c.license_expiry))});
		const std::string what = license_state_sentence(c);
		if (c.license == LicenseState::Unlicensed)
			log::warning(what, fields);
		else
			log::notice(what, fields);
	}
	record_feature(ctx, c, outcome, view.has_value(), held);
	if (auto w = fs::write_file_atomic_at(state_fd, COUNTERS_FILE, state_display, c.serialize(),
					      {.mode = 0600, .fsync = false, .skip_if_unchanged = false});
	    !w)
		log::warning(w.error().message + ", license metrics not counted");
	const std::string &dir = ctx.config.metrics_dir;
	publish_metrics(ctx.real(dir), dir, "unbounded-nvidia-license.prom",
			license_metrics_text(c, now, std::chrono::duration<double>(ctx.config.licensing.reload_interval).count()));
}

}  // namespace unbounded
