#include "license_reload.hpp"

#include "confined_open.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "message_ids.hpp"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace unbounded {

namespace {

constexpr const char *STATE_MAGIC = "UNBOUNDED-LICENSE-STATE 1\n";
constexpr const char *APPLIED = "applied.state";  // what is installed and known to work (last known good)
constexpr const char *FAILED = "failed.state";    // a set after which nvidia-gridd did not stay up
// Installed while nvidia-gridd restarts, until the restart is judged: left behind by a run that was
// killed (or stopped by a shutdown) in the middle, so the next run knows the installed files are unverified.
constexpr const char *RESTARTING = "restarting.state";
// Installed at boot, before nvidia-gridd's first start: the next run checks that it came up with them.
constexpr const char *BOOT_INSTALLED = "installed-at-boot.state";
constexpr unsigned MAX_ROUNDS = 5;                 // re-checks of a source that keeps changing

// Reads `name` under an open directory with every symlink resolved beneath it: a projected volume's
// gridd.conf -> ..data/gridd.conf -> ..2026_.../gridd.conf stays inside the source directory.
Result<std::optional<std::string>> read_beneath(int dirfd, const std::string &name, const std::string &display)
{
	// O_NONBLOCK: the projection is writable by whoever controls the Secret's volume; a FIFO there
	// must not hang the reloader.
	auto opened = open_confined(dirfd, name, ConfinedOpen{Confinement::Beneath, O_RDONLY | O_NOCTTY | O_NONBLOCK, true});
	if (!opened) {
		const int e = opened.error().errnum;
		if (e == ENOENT)
			return std::optional<std::string>();
		if (e == EXDEV)  // what RESOLVE_BENEATH answers for an escape; "cross-device link" misleads
			return fail(make_error("Refusing " + display + ": a symlink on its path leads outside the licensing source directory",
					       EXIT_NOT_READY, EXDEV));
		return fail(errno_error(e, "Failed to open " + display));
	}
	UniqueFd f = std::move(*opened);
	if (auto r = fs::require_regular(f.get(), display); !r)
		return fail(r.error());
	auto text = fs::read_fd(f.get(), display, 1u << 20);
	if (!text)
		return fail(text.error());
	return std::optional<std::string>(std::move(*text));
}

}  // namespace

std::vector<LicenseItem> license_items(const LicensingConfig &lic)
{
	return {
		{"gridd.conf", lic.gridd_conf_target, 0644, lic.legacy_gridd_conf},
		{"client_configuration_token.tok", lic.client_token_target, 0600, lic.legacy_client_token},
	};
}

const char *outcome_name(ReloadOutcome o)
{
	switch (o) {
	case ReloadOutcome::Disabled: return "disabled";
	case ReloadOutcome::NoSource: return "no-source";
	case ReloadOutcome::Unchanged: return "unchanged";
	case ReloadOutcome::Recorded: return "recorded";
	case ReloadOutcome::KnownBad: return "known-bad";
	case ReloadOutcome::Applied: return "applied";
	case ReloadOutcome::RolledBack: return "rolled-back";
	case ReloadOutcome::Failed: return "failed";
	case ReloadOutcome::Interrupted: return "interrupted";
	case ReloadOutcome::Installed: return "installed";
	case ReloadOutcome::Verified: return "verified";
	}
	return "?";
}

std::string LicenseSet::serialize() const
{
	std::string s = STATE_MAGIC;
	for (const auto &[name, content] : files) {
		s += name + " " + std::to_string(content.size()) + "\n";
		s += content;
		s += "\n";
	}
	return s;
}

std::optional<LicenseSet> LicenseSet::parse(std::string_view text)
{
	if (!text.starts_with(STATE_MAGIC))
		return std::nullopt;
	text.remove_prefix(std::string_view(STATE_MAGIC).size());
	LicenseSet set;
	while (!text.empty()) {
		auto nl = text.find('\n');
		if (nl == std::string_view::npos)
			return std::nullopt;
		std::string_view header = text.substr(0, nl);
		auto sp = header.rfind(' ');
		if (sp == std::string_view::npos || sp == 0)
			return std::nullopt;
		std::size_t size = 0;
		auto [p, ec] = std::from_chars(header.data() + sp + 1, header.data() + header.size(), size);
		if (ec != std::errc() || p != header.data() + header.size())
			return std::nullopt;
		text.remove_prefix(nl + 1);
		if (text.size() < size + 1 || text[size] != '\n')
			return std::nullopt;
		set.files.emplace(std::string(header.substr(0, sp)), std::string(text.substr(0, size)));
		text.remove_prefix(size + 1);
	}
	return set;
}

std::string LicenseSet::names() const
{
	std::string s;
	for (const auto &[name, _] : files)
		s += (s.empty() ? "" : ", ") + name;
	return s.empty() ? "(none)" : s;
}

LicenseReloader::LicenseReloader(const Context &ctx, UnitManager &units, ReloadSeams seams)
	: ctx_(ctx), units_(units), seams_(std::move(seams)), items_(license_items(ctx.config.licensing))
{
}

void LicenseReloader::note(ReloadReport &r, std::string msg) const
{
	log::info(msg);
	r.messages.push_back(std::move(msg));
}

Result<LicenseSet> LicenseReloader::read_source() const
{
	const LicensingConfig &lic = ctx_.config.licensing;
	LicenseSet set;
	UniqueFd dir(::open(ctx_.real(lic.source_dir).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	for (const auto &item : items_) {
		if (dir) {
			auto c = read_beneath(dir.get(), item.name, fs::join(lic.source_dir, item.name));
			if (!c)
				return fail(c.error());
			if (*c) {
				set.files[item.name] = std::move(**c);
				continue;
			}
		}
		// Per file, the legacy single-file mount (a Kubernetes subPath): an older operator's layout.
		auto legacy = fs::read_file(ctx_.real(item.legacy), 1u << 20);
		if (legacy)
			set.files[item.name] = std::move(*legacy);
		else if (legacy.error().errnum != ENOENT && legacy.error().errnum != ENOTDIR)
			return fail(legacy.error());
	}
	return set;
}

Result<std::optional<LicenseSet>> LicenseReloader::read_state(const char *name) const
{
	const std::string path = fs::join(ctx_.real(ctx_.config.licensing.state_dir), name);
	auto text = fs::read_file(path, 4u << 20);
	if (!text) {
		if (text.error().errnum == ENOENT)
			return std::optional<LicenseSet>();
		return fail(text.error());
	}
	auto set = LicenseSet::parse(*text);
	if (!set)
		log::warning("Ignoring damaged license state " + fs::join(ctx_.config.licensing.state_dir, name));
	return set;
}

Result<void> LicenseReloader::write_state(const char *name, const std::optional<LicenseSet> &set) const
{
	const std::string path = fs::join(ctx_.real(ctx_.config.licensing.state_dir), name);
	if (!set) {
		if (::unlink(path.c_str()) < 0 && errno != ENOENT)
			return fail(last_errno_error("Failed to remove " + path));
		return {};
	}
	auto w = fs::write_file_atomic(path, set->serialize(), {.mode = 0600, .fsync = true, .skip_if_unchanged = true});
	if (!w)
		return fail(w.error());
	return {};
}

LicenseSet LicenseReloader::read_targets() const
{
	LicenseSet set;
	for (const auto &item : items_)
		if (auto c = fs::read_file(ctx_.real(item.target), 1u << 20))
			set.files[item.name] = std::move(*c);
	return set;
}

// Installs every file of `set` atomically with its mode; files of `previous` that `set` lacks are
// removed (a rollback to a state without a token removes the token).
Result<void> LicenseReloader::install(const LicenseSet &set, const LicenseSet *previous) const
{
	for (const auto &item : items_) {
		const std::string path = ctx_.real(item.target);
		auto it = set.files.find(item.name);
		if (it == set.files.end()) {
			if (previous && previous->files.count(item.name) && ::unlink(path.c_str()) < 0 && errno != ENOENT)
				return fail(last_errno_error("Failed to remove " + item.target));
			continue;
		}
		if (auto r = fs::mkdir_p(fs::dirname(path), 0755); !r)
			return r;
		auto w = fs::write_file_atomic(path, it->second,
					       {.mode = item.mode, .fsync = true, .skip_if_unchanged = true, .owner_root = ::geteuid() == 0});
		if (!w)
			return fail(with_context(w.error(), "Failed to install " + item.target));
	}
	return {};
}

// Whether the system is going down: then a refused start job or a daemon that went down are the
// shutdown's doing, not the files'. A manager that cannot say is taken as not stopping.
bool LicenseReloader::shutting_down()
{
	auto s = units_.system_stopping();
	if (!s)
		log::warning(s.error().message);
	return s && *s;
}

// Restarts nvidia-gridd: a stop job (SIGTERM, which returns the license lease; the unit's drop-in
// forbids SIGKILL), a wait for the old process to be gone, a start job, the settle time, and a
// liveness check. Never starts a second daemon beside one that still runs. Every wait in here is
// waited out in full, SIGTERM or not: a daemon that crashes seconds after its start must not pass the
// liveness check because the settle time was cut short.
Result<LicenseReloader::Restart> LicenseReloader::restart_gridd(ReloadReport &report)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	const std::string &unit = lic.gridd_unit;
	auto before = units_.status(unit);
	if (!before)
		return fail(before.error());
	if (before->send_sigkill || before->kill_signal != SIGTERM)
		return fail(make_error(unit + " has " + (before->send_sigkill ? "SendSIGKILL=yes" : "KillSignal other than SIGTERM") +
				       " (the 50-unbounded-nvidia.conf drop-in is missing or overridden): refusing to restart it, "
				       "a SIGKILL could leak the license lease"));
	report.restarts++;
	const std::uint32_t old_pid = before->main_pid;
	auto stopped = units_.stop(unit, lic.stop_timeout);
	// The job can finish a moment before the old process is reaped: give it a short grace.
	for (int i = 0; i < 20 && old_pid && seams_.pid_alive(old_pid); i++)
		seams_.wait(Millis(100));
	if (old_pid && seams_.pid_alive(old_pid))
		return fail(make_error(unit + " (PID " + std::to_string(old_pid) + ") did not exit after SIGTERM within " +
				       format_duration(lic.stop_timeout) + "; not starting a second instance" +
				       (stopped ? "" : ": " + stopped.error().message), EXIT_NOT_READY, ETIMEDOUT));
	if (!stopped)
		return fail(stopped.error());
	if (auto started = units_.start(unit, lic.stop_timeout); !started) {
		log::error(started.error().message);
		return Restart::NotStarted;
	}
	seams_.wait(lic.settle_time);
	auto after = units_.status(unit);
	if (!after)
		return fail(after.error());
	return after->active_state == "active" && after->main_pid != 0 && seams_.pid_alive(after->main_pid) ? Restart::Up
													     : Restart::Down;
}

// nvidia-gridd did not stay up with `bad`: remember that, put `good` back and restart it.
Result<void> LicenseReloader::roll_back(ReloadReport &report, const LicenseSet &good, const LicenseSet &bad)
{
	log::error("nvidia-gridd did not stay up with the new licensing files; restoring the last known good ones.",
		   {{"MESSAGE_ID", message_id::LICENSE_ROLLED_BACK}});
	if (auto r = write_state(FAILED, bad); !r)
		return r;
	if (auto r = install(good, &bad); !r) {
		report.outcome = ReloadOutcome::Failed;
		log::error("Failed to restore the last known good licensing files: " + r.error().message,
			   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return write_state(RESTARTING, std::nullopt);
	}
	auto again = restart_gridd(report);
	if (!again || *again != Restart::Up) {
		report.outcome = ReloadOutcome::Failed;
		log::error("nvidia-gridd is not running even with the last known good licensing files" +
				   (again ? std::string() : ": " + again.error().message),
			   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
		return write_state(RESTARTING, std::nullopt);
	}
	report.outcome = ReloadOutcome::RolledBack;
	report.messages.push_back("rolled back");
	log::error("Rolled back to the last known good licensing files; nvidia-gridd is running with them. "
		   "The new files are not retried until they change.",
		   {{"MESSAGE_ID", message_id::LICENSE_ROLLED_BACK}});
	return write_state(RESTARTING, std::nullopt);
}

// Files installed at boot were read by nvidia-gridd's first start: they need a liveness check, not a
// restart. Returns whether it decided something (the run's outcome).
Result<bool> LicenseReloader::check_boot_install(ReloadReport &report)
{
	auto boot = read_state(BOOT_INSTALLED);
	if (!boot)
		return fail(boot.error());
	if (!*boot)
		return false;
	const LicensingConfig &lic = ctx_.config.licensing;
	auto status = units_.status(lic.gridd_unit);
	if (!status)
		return fail(status.error());
	const std::string &state = status->active_state;
	if (state == "activating" || state == "reloading" || state == "deactivating") {
		note(report, lic.gridd_unit + " is " + state + "; the licensing files installed at boot are checked by the next run.");
		return false;
	}
	const bool up = state == "active" && status->main_pid != 0 && seams_.pid_alive(status->main_pid);
	if (up || state == "inactive") {
		if (auto r = write_state(APPLIED, **boot); !r)
			return fail(r.error());
		if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r)
			return fail(r.error());
		report.outcome = ReloadOutcome::Verified;
		note(report, up ? lic.gridd_unit + " started with the licensing files installed at boot (" + (*boot)->names() +
					  ") and is running; recorded them as applied."
				: lic.gridd_unit + " is not running; the licensing files installed at boot are recorded for its next start.");
		return true;
	}
	// It did not come up with them.
	auto applied = read_state(APPLIED);
	if (!applied)
		return fail(applied.error());
	if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r)
		return fail(r.error());
	if (*applied && **applied != **boot) {
		if (auto r = roll_back(report, **applied, **boot); !r)
			return fail(r.error());
		return true;
	}
	if (auto r = write_state(FAILED, **boot); !r)
		return fail(r.error());
	report.outcome = ReloadOutcome::Failed;
	log::error(lic.gridd_unit + " is " + state + " with the licensing files installed at boot, and there are no last known good "
		   "ones to return to; not retrying these files until they change.",
		   {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
	return true;
}

// What every run does first: nothing when switched off; the state directory; the installed files'
// owner and mode. Returns whether to go on.
Result<bool> LicenseReloader::prepare(ReloadReport &report) const
{
	if (!ctx_.config.licensing.auto_reload) {
		report.outcome = ReloadOutcome::Disabled;
		note(report, "License auto-reload is switched off (VGPU_LICENSE_AUTO_RELOAD / licensing.auto_reload).");
		return false;
	}
	if (auto r = fs::mkdir_p(ctx_.real(ctx_.config.licensing.state_dir), 0700); !r)
		return fail(r.error());
	enforce_target_attributes(report);
	return true;
}

Result<ReloadReport> LicenseReloader::install_at_boot()
{
	const LicensingConfig &lic = ctx_.config.licensing;
	ReloadReport report;
	auto enabled = prepare(report);
	if (!enabled)
		return fail(enabled.error());
	if (!*enabled)
		return report;
	auto source = read_source();
	if (!source)
		return fail(source.error());
	if (source->empty()) {
		report.outcome = ReloadOutcome::NoSource;
		note(report, "No licensing files in " + lic.source_dir + " or the legacy paths, nothing to install.");
		return report;
	}
	auto applied = read_state(APPLIED);
	auto failed = read_state(FAILED);
	auto restarting = read_state(RESTARTING);
	for (const auto *r : {&applied, &failed, &restarting})
		if (!*r)
			return fail(r->error());
	const LicenseSet targets = read_targets();
	LicenseSet want = *source;
	if (*failed && **failed == *source) {
		// A config after which nvidia-gridd did not stay up: it starts with the last known good.
		want = *applied ? **applied : targets;
		note(report, "The licensing files in the source failed before; " + lic.gridd_unit + " starts with the last known good ones.");
	}
	if (targets == want && *applied && **applied == want && !*restarting) {
		report.outcome = ReloadOutcome::Unchanged;
		note(report, "Licensing files already installed and applied.");
		return report;
	}
	if (want.empty())
		return report;
	if (targets != want)
		if (auto r = install(want, &targets); !r)
			return fail(r.error());
	if (auto r = write_state(BOOT_INSTALLED, want); !r)
		return fail(r.error());
	if (auto r = write_state(RESTARTING, std::nullopt); !r)
		return fail(r.error());
	report.outcome = ReloadOutcome::Installed;
	log::notice((targets != want ? "Installed the licensing files (" : "The installed licensing files (") + want.names() +
		    ") are what " + lic.gridd_unit + " starts with; the next reload run checks that it came up with them.");
	report.messages.push_back("installed");
	return report;
}

// The installed files keep their owner and mode on every run, whatever else happens: a token left
// world-readable (by an older installer, or by hand) is fixed, not recorded as it is.
void LicenseReloader::enforce_target_attributes(ReloadReport &report) const
{
	for (const auto &item : items_) {
		UniqueFd f(::open(ctx_.real(item.target).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
		struct stat st{};
		if (!f || ::fstat(f.get(), &st) < 0 || !S_ISREG(st.st_mode))
			continue;  // absent (installed later) or not a file (refused when it is installed)
		const bool want_root = ::geteuid() == 0;
		if ((st.st_mode & 07777) == item.mode && (!want_root || (st.st_uid == 0 && st.st_gid == 0)))
			continue;
		if ((want_root && ::fchown(f.get(), 0, 0) < 0) || ::fchmod(f.get(), item.mode) < 0) {
			log::warning(errno_error(errno, "Failed to set the owner and mode of " + item.target).message);
			continue;
		}
		note(report, "Fixed " + item.target + ": mode " + format_mode(st.st_mode) + " owner " + std::to_string(st.st_uid) +
				     " -> mode " + format_mode(item.mode) +
				     (want_root ? " owner root" : ""));
	}
}

// Installs `latest` and restarts nvidia-gridd with it; `running` is what to return to. Returns true
// when it was applied (the caller checks the source again), false when the run ends here (rolled
// back, failed, or stopped before the outcome was known; report.outcome says which).
Result<bool> LicenseReloader::apply_set(ReloadReport &report, const LicenseSet &latest, const LicenseSet &running)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	// What is recorded as applied is exactly these bytes, read before installing: a rotation that
	// lands from here on differs from the record and is applied by the re-check after.
	if (seams_.after_stage)
		seams_.after_stage("recorded");
	if (auto r = write_state(RESTARTING, latest); !r)
		return fail(r.error());
	// These files replace whatever the boot install put there. Its record goes with them: a run that
	// found nvidia-gridd still activating left the boot check to the next run, which would otherwise
	// record the boot's files as applied over this rotation and restart nvidia-gridd a second time
	// for it (issue 26, item 11: one rotation, two restarts, on a loaded machine).
	if (auto r = write_state(BOOT_INSTALLED, std::nullopt); !r) {
		(void)write_state(RESTARTING, std::nullopt);
		return fail(r.error());
	}
	if (auto r = install(latest, &running); !r) {
		(void)install(running, &latest);
		(void)write_state(RESTARTING, std::nullopt);
		return fail(r.error());
	}
	if (seams_.after_stage)
		seams_.after_stage("installed");

	auto status = units_.status(lic.gridd_unit);
	if (!status)
		return fail(status.error());
	bool up = true;
	if (status->active_state == "active" || status->active_state == "activating" || status->active_state == "reloading") {
		auto r = restart_gridd(report);
		if (!r) {
			// Could not even try (unsafe unit settings, a stop that did not end): put the files
			// back so the disk matches the daemon that still runs, and try again next time.
			(void)install(running, &latest);
			(void)write_state(RESTARTING, std::nullopt);
			report.outcome = ReloadOutcome::Failed;
			log::error("Failed to apply the licensing files: " + r.error().message, {{"MESSAGE_ID", message_id::LICENSE_FAILED}});
			report.messages.push_back(r.error().message);
			return false;
		}
		// The start job did not run while we are being stopped or the system goes down (a shutdown
		// refuses it, sometimes before our SIGTERM arrives), or nvidia-gridd went down with the
		// rest of a shutdown: whether these files work is unknown. They stay installed for the next
		// start and stay unverified; the next run, or the next boot's install, judges them. Nothing
		// is recorded as good or bad. (A daemon that dies while only we are stopped, with the
		// system up, is judged: that is the files' doing.)
		if ((*r == Restart::NotStarted && (seams_.stop_requested() || shutting_down())) ||
		    (*r == Restart::Down && shutting_down())) {
			report.outcome = ReloadOutcome::Interrupted;
			note(report, "Stopped while " + lic.gridd_unit + " restarted, before it could be judged; the new files stay "
				     "installed and are checked by the next run.");
			return false;
		}
		up = *r == Restart::Up;
	} else {
		note(report, lic.gridd_unit + " is not running (" + status->active_state + "); installed the files for its next start.");
	}

	if (!up) {
		// nvidia-gridd did not stay up with the new files: last known good back, restart, remember.
		if (auto r = roll_back(report, running, latest); !r)
			return fail(r.error());
		return false;
	}
	if (auto r = write_state(APPLIED, latest); !r)
		return fail(r.error());
	(void)write_state(FAILED, std::nullopt);
	(void)write_state(RESTARTING, std::nullopt);
	report.outcome = ReloadOutcome::Applied;
	report.applied++;
	log::notice("Applied rotated licensing files (" + latest.names() + ")" +
			    (status->active_state == "active" ? ", nvidia-gridd restarted and running." : "."),
		    {{"MESSAGE_ID", message_id::LICENSE_APPLIED}});
	report.messages.push_back("applied");
	return true;
}

// Content that failed before: not retried until it changes. A run killed while rolling back (the
// files on disk are not the last known good) finishes the rollback.
Result<void> LicenseReloader::known_bad(ReloadReport &report, const LicenseSet &source, const std::optional<LicenseSet> &applied,
					bool unverified, bool set_outcome)
{
	if (unverified && applied && read_targets() != *applied)
		return roll_back(report, *applied, source);
	if (auto r = write_state(RESTARTING, std::nullopt); !r)
		return r;
	if (set_outcome)
		report.outcome = ReloadOutcome::KnownBad;
	note(report, "These licensing files failed before (nvidia-gridd did not stay up); not retrying until they change.");
	return {};
}

// Sleeps a random share of licensing.jitter; false when stopped meanwhile (nothing changed yet).
bool LicenseReloader::sleep_jitter(ReloadReport &report, const LicenseSet &source, bool unverified)
{
	const LicensingConfig &lic = ctx_.config.licensing;
	report.jitter = Millis(lic.jitter.count() > 0
				       ? static_cast<Millis::rep>(seams_.random_below(static_cast<std::uint64_t>(lic.jitter.count()) + 1))
				       : 0);
	note(report, (unverified ? "A restart of " + lic.gridd_unit + " was interrupted before it was judged; restarting with " :
				   "Licensing files changed; applying ") +
			     "(" + source.names() + ") after a jitter of " + format_duration(report.jitter) + ".");
	seams_.sleep(report.jitter);
	if (!seams_.stop_requested())
		return true;
	report.outcome = report.applied ? report.outcome : ReloadOutcome::Interrupted;
	note(report, "Stopped during the jitter, nothing changed.");
	return false;
}

Result<ReloadReport> LicenseReloader::run()
{
	const LicensingConfig &lic = ctx_.config.licensing;
	ReloadReport report;
	auto enabled = prepare(report);
	if (!enabled)
		return fail(enabled.error());
	if (!*enabled)
		return report;
	auto decided = check_boot_install(report);
	if (!decided)
		return fail(decided.error());
	auto first = [&](unsigned round, ReloadOutcome o) {
		if (round == 0 && !*decided)
			report.outcome = o;
	};

	for (unsigned round = 0; round < MAX_ROUNDS; round++) {
		auto source = read_source();
		if (!source)
			return fail(source.error());
		if (source->empty()) {
			first(round, ReloadOutcome::NoSource);
			if (round == 0)
				note(report, "No licensing files in " + lic.source_dir + " or the legacy paths, nothing to do.");
			return report;
		}
		auto applied = read_state(APPLIED);
		if (!applied)
			return fail(applied.error());
		// A run killed in the middle of a restart (or stopped by a shutdown) leaves the installed
		// files unverified: nothing is taken for granted until a restart has been judged.
		auto restarting = read_state(RESTARTING);
		if (!restarting)
			return fail(restarting.error());
		const bool unverified = restarting->has_value();
		if (!unverified && *applied && **applied == *source) {
			if (round == 0) {
				first(round, ReloadOutcome::Unchanged);
				note(report, "Licensing files unchanged since they were last applied.");
			}
			return report;
		}
		// First run (on a machine set up before the reloader): nvidia-gridd started with the
		// installed files, so when they are the source's, record them and restart nothing.
		if (!unverified && !*applied && read_targets() == *source) {
			if (auto r = write_state(APPLIED, *source); !r)
				return fail(r.error());
			first(round, ReloadOutcome::Recorded);
			note(report, "Recorded the installed licensing files (" + source->names() + ") as the applied ones.");
			continue;
		}
		auto failed = read_state(FAILED);
		if (!failed)
			return fail(failed.error());
		if (*failed && **failed == *source) {
			if (auto r = known_bad(report, *source, *applied, unverified, round == 0 && !*decided); !r)
				return fail(r.error());
			return report;
		}

		// A change. Wait a random share of the jitter so a cluster-wide rotation does not reach the
		// license server in one burst; then use what the source holds after the wait.
		if (!sleep_jitter(report, *source, unverified))
			return report;
		auto latest = read_source();
		if (!latest)
			return fail(latest.error());
		if (latest->empty() || (!unverified && *applied && **applied == *latest))
			continue;

		// From here on a restart runs to its end, SIGTERM or not: nvidia-gridd is never left stopped.
		// The last known good is what nvidia-gridd runs with, unless an interrupted restart left
		// unverified files: then it is the last applied record.
		const LicenseSet running = unverified && *applied ? **applied : read_targets();
		auto applied_now = apply_set(report, *latest, running);
		if (!applied_now)
			return fail(applied_now.error());
		if (!*applied_now)
			return report;
		// re-check: a rotation may have landed meanwhile
	}
	return report;
}

}  // namespace unbounded
