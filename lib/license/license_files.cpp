// The reloader's files: the source it reads (confined to its directory), its records, the installed
// targets with their owner and mode.
#include "license_reload.hpp"

#include "confined_open.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "log.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {

using namespace reload_records;

namespace {

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
	const std::string display = fs::join(ctx_.config.licensing.state_dir, name);
	if (!set) {
		if (const auto newer = LicenseSet::newer_format(*text, display))
			log::warning(*newer + ", ignoring it");
		else
			log::warning("Ignoring damaged license state " + display);
	}
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

// The installed files keep their owner and mode on every run, whatever else happens: a token left
// world-readable (by an older installer, or by hand) is fixed, not recorded as it is.
void LicenseReloader::enforce_target_attributes(ReloadReport &report) const
{
	for (const auto &item : items_) {
		UniqueFd f(::open(ctx_.real(item.target).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
		struct stat st = {};
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

}  // namespace unbounded
