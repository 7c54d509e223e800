#include "license_metrics.hpp"

#include "fs.hpp"
#include "log.hpp"
#include "metrics.hpp"

#include <chrono>
#include <cstdlib>

namespace unbounded {
namespace {

constexpr const char *COUNTERS_FILE = "metrics.state";
constexpr ReloadOutcome ALL_OUTCOMES[] = {
	ReloadOutcome::Disabled, ReloadOutcome::NoSource, ReloadOutcome::Unchanged, ReloadOutcome::Recorded,
	ReloadOutcome::KnownBad, ReloadOutcome::Applied,  ReloadOutcome::RolledBack, ReloadOutcome::Failed,
	ReloadOutcome::Interrupted, ReloadOutcome::Installed, ReloadOutcome::Verified,
};

}  // namespace

std::string LicenseCounters::serialize() const
{
	std::string s;
	for (const auto &[outcome, n] : runs)
		s += "runs " + outcome + " " + std::to_string(static_cast<long long>(n)) + "\n";
	s += "last_applied " + std::to_string(static_cast<long long>(last_applied)) + "\n";
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
		} else if (line.starts_with("last_applied ")) {
			const double t = std::strtod(line.c_str() + 13, &end);
			if (end && *end == '\0' && t >= 0)
				c.last_applied = t;
		}
	}
	return c;
}

std::string license_metrics_text(const LicenseCounters &c, double now_seconds)
{
	MetricsText m;
	for (auto o : ALL_OUTCOMES) {
		auto it = c.runs.find(outcome_name(o));
		m.counter("unbounded_nvidia_license_reloads_total", "License reloader runs by outcome", it == c.runs.end() ? 0 : it->second,
			  {{"outcome", outcome_name(o)}});
	}
	m.gauge("unbounded_nvidia_license_last_run_timestamp_seconds", "When the license reloader last ran (Unix time)", now_seconds);
	m.gauge("unbounded_nvidia_license_last_applied_timestamp_seconds",
		"When rotated licensing files were last applied (Unix time, 0 for never)", c.last_applied);
	return m.text();
}

void record_license_metrics(const Context &ctx, int state_fd, ReloadOutcome outcome)
{
	const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
	const std::string state_display = fs::join(ctx.config.licensing.state_dir, COUNTERS_FILE);
	LicenseCounters c;
	if (auto text = fs::read_file_at(state_fd, COUNTERS_FILE, state_display, 64 * 1024))
		c = LicenseCounters::parse(*text);
	c.runs[outcome_name(outcome)] += 1;
	if (outcome == ReloadOutcome::Applied)
		c.last_applied = now;
	if (auto w = fs::write_file_atomic_at(state_fd, COUNTERS_FILE, state_display, c.serialize(),
					      {.mode = 0600, .fsync = false, .skip_if_unchanged = false});
	    !w)
		log::warning(w.error().message + ", license metrics not counted");
	const std::string &dir = ctx.config.metrics_dir;
	publish_metrics(ctx.real(dir), dir, "unbounded-nvidia-license.prom", license_metrics_text(c, now));
}

}  // namespace unbounded
