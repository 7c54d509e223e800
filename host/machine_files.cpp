#include "machine_files.hpp"

#include "format.hpp"
#include "fs.hpp"
#include "nspawn_settings.hpp"

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::host {

namespace {

constexpr const char *DROPIN_NAME = "50-unbounded-nvidia.conf";
constexpr std::size_t MAX_SETTINGS_FILE = 1u << 20;

// An existing file's text, or nullopt when there is none. Anything but a regular file (a symlink, a
// directory, a FIFO) is an error naming it: binds replaces only files.
Result<std::optional<std::string>> read_if_there(const Context &ctx, const std::string &path)
{
	struct stat st = {};
	if (::lstat(ctx.real(path).c_str(), &st) < 0) {
		if (errno == ENOENT)
			return std::optional<std::string>();
		return fail(last_errno_error("Failed to look at " + path));
	}
	if (!S_ISREG(st.st_mode))
		return fail(make_error("Refusing to replace " + path + ": it is " + fs::file_type_name(st.st_mode) + ", not a file"));
	auto text = fs::read_file(ctx.real(path), MAX_SETTINGS_FILE);
	if (!text)
		return fail(text.error());
	return std::optional(std::move(*text));
}

std::string settings_file(const MachineFiles &f, const std::string &name) { return f.settings + "/" + name; }

// The settings files binds owns in the directory (every unbounded-nvidia.* there) that `b` no longer gives.
std::vector<std::string> stale_settings(const Context &ctx, const MachineFiles &f, const HostBinds &b)
{
	std::vector<std::string> names;
	if (auto d = fs::open_dir(ctx.real(f.settings)))
		if (auto list = fs::list_dir(d->get(), f.settings))
			for (const auto &n : *list)
				if (n.starts_with("unbounded-nvidia.") && std::none_of(b.settings.begin(), b.settings.end(), [&](const auto &s) { return s.first == n; }))
					names.push_back(n);
	std::sort(names.begin(), names.end());
	return names;
}

struct Before {
	std::optional<std::string> text;
	mode_t mode = 0644;  // a new file's too
	uid_t uid = 0;
	gid_t gid = 0;
};

Result<void> put_back(const Context &ctx, const FileChange &c, const Before &b)
{
	if (!b.text) {
		if (::unlink(ctx.real(c.path).c_str()) < 0 && errno != ENOENT)
			return fail(last_errno_error("Failed to remove " + c.path));
		return {};
	}
	const fs::AtomicWriteOptions opts{.mode = b.mode, .fsync = true, .skip_if_unchanged = true, .owner_root = false, .owner = std::pair{b.uid, b.gid}};
	auto w = fs::write_file_atomic(ctx.real(c.path), *b.text, opts);
	return w ? Result<void>() : fail(w.error());
}

}  // namespace

Result<MachineFiles> locate_machine_files(const Context &ctx, const std::string &machine, const std::string &unit, bool writing)
{
	MachineFiles f;
	f.machine = machine;
	f.unit = unit.empty() ? "systemd-nspawn@" + machine + ".service" : unit;
	f.nspawn = "/etc/systemd/nspawn/" + machine + ".nspawn";
	f.dropin = "/etc/systemd/system/" + f.unit + ".d/" + DROPIN_NAME;
	f.settings = settings_dir(machine);
	for (const char *dir : {"/etc/systemd/nspawn/", "/run/systemd/nspawn/", "/var/lib/machines/"}) {
		const std::string path = dir + machine + ".nspawn";
		auto text = read_if_there(ctx, path);
		if (!text)
			return fail(text.error());
		if (!*text)
			continue;
		if (writing && path.starts_with("/run/"))
			return fail(make_error(path + " is the settings file systemd-nspawn uses for " + machine +
					       " (another program's, rewritten by it): a file in /etc/systemd/nspawn would hide it. Add the lines of "
					       "`unbounded-nvidia-host binds " +
					       machine + " --print` to it, or move it to /etc/systemd/nspawn"));
		if (writing && path.starts_with("/var/"))
			return fail(make_error(path + " is the settings file systemd-nspawn uses for " + machine +
					       ", untrusted (nspawn ignores its Bind=, Capability= and network lines): a file in "
					       "/etc/systemd/nspawn would hide it and trust every line of it copied there. Move it to "
					       "/etc/systemd/nspawn once you trust its lines, then run binds again"));
		f.base = path;
		f.base_text = std::move(**text);
		break;
	}
	return f;
}

Result<std::vector<FileChange>> planned_files(const Context &ctx, const MachineFiles &f, const HostBinds &b)
{
	std::vector<FileChange> out;
	for (const auto &[name, value] : b.settings)
		out.push_back({settings_file(f, name), value + "\n"});
	for (const auto &name : stale_settings(ctx, f, b))
		out.push_back({settings_file(f, name), std::nullopt});
	out.push_back({f.dropin, device_allow_dropin(b)});
	out.push_back({f.nspawn, merge_settings(f.base_text, b.nspawn)});
	return out;
}

std::vector<std::string> file_differences(const Context &ctx, const MachineFiles &f, const HostBinds &b)
{
	std::vector<std::string> lines;
	const std::string &nspawn = f.base.empty() ? f.nspawn : f.base;
	if (f.base != f.nspawn)
		lines.push_back(f.nspawn + " is missing" + (f.base.empty() ? "" : " (nspawn reads " + f.base + ")"));
	const auto d = diff_settings(f.base_text, b.nspawn);
	for (const auto &l : d.missing)
		lines.push_back("missing in " + nspawn + ": [" + l.section + "] " + l.text());
	for (const auto &l : d.superfluous)
		lines.push_back("superfluous in " + nspawn + ": [" + l.section + "] " + l.text());
	auto dropin = read_if_there(ctx, f.dropin);
	if (!dropin) {
		lines.push_back(dropin.error().message);
	} else if (!*dropin) {
		lines.push_back(f.dropin + " is missing");
	} else if (**dropin != device_allow_dropin(b)) {
		// The drop-in is ours whole: its DeviceAllow= lines compared both ways, then anything else.
		const std::size_t before = lines.size();
		std::vector<std::string> present;
		for (const auto &l : setting_lines(**dropin))
			if (l.section == "Service" && l.key == "DeviceAllow")
				present.push_back(l.value);
		for (const auto &dev : b.device_allow)
			if (std::find(present.begin(), present.end(), dev) == present.end())
				lines.push_back("missing in " + f.dropin + ": DeviceAllow=" + dev);
		for (const auto &dev : present)
			if (std::find(b.device_allow.begin(), b.device_allow.end(), dev) == b.device_allow.end())
				lines.push_back("superfluous in " + f.dropin + ": DeviceAllow=" + dev);
		if (lines.size() == before)
			lines.push_back(f.dropin + " differs from what binds writes");
	}
	for (const auto &[name, value] : b.settings) {
		auto text = read_if_there(ctx, settings_file(f, name));
		if (!text)
			lines.push_back(text.error().message);
		else if (!*text)
			lines.push_back(settings_file(f, name) + " is missing (" + name + "=" + value + ")");
		else if (**text != value + "\n")
			lines.push_back(settings_file(f, name) + " says '" + std::string(trim_blanks(**text)) + "', binds gives '" + value + "'");
	}
	for (const auto &name : stale_settings(ctx, f, b))
		lines.push_back("superfluous: " + settings_file(f, name) + " (the machine still reads it)");
	return lines;
}

Result<std::vector<std::string>> commit_files(const Context &ctx, const std::vector<FileChange> &changes)
{
	// Everything that could fail before a reader sees a change: what each file was (a directory or a
	// link where a file goes is refused here), its directory, and the new bytes in a temp file.
	std::vector<Before> before(changes.size());
	std::vector<fs::PreparedWrite> prepared(changes.size());
	for (std::size_t i = 0; i < changes.size(); i++) {
		const FileChange &c = changes[i];
		auto text = read_if_there(ctx, c.path);
		if (!text)
			return fail(text.error());
		before[i].text = std::move(*text);
		struct stat st = {};
		if (before[i].text && ::lstat(ctx.real(c.path).c_str(), &st) == 0)
			before[i] = Before{before[i].text, static_cast<mode_t>(st.st_mode & 07777), st.st_uid, st.st_gid};
		if (!c.text)
			continue;
		if (auto r = fs::mkdir_p(ctx.real(fs::dirname(c.path)), 0755); !r)
			return fail(with_context(r.error(), "Failed to write " + c.path));
		// An existing file keeps its mode and owner: an operator's 0600 .nspawn holds secrets.
		fs::AtomicWriteOptions opts{.mode = before[i].mode, .fsync = true, .skip_if_unchanged = true};
		if (before[i].text)
			opts.owner = std::pair{before[i].uid, before[i].gid};
		auto w = fs::prepare_file_atomic(ctx.real(c.path), *c.text, opts);
		if (!w)
			return fail(with_context(w.error(), "Failed to write " + c.path));
		prepared[i] = std::move(*w);
	}
	std::vector<std::string> done;
	for (std::size_t i = 0; i < changes.size(); i++) {
		const FileChange &c = changes[i];
		Result<void> r;
		bool changed = true;
		if (c.text) {
			changed = prepared[i].outcome() == fs::WriteOutcome::Written;
			// The directory's sync failing leaves the file renamed into place: said, not undone.
			Error sync_error;
			r = prepared[i].commit(&sync_error);
			if (r && !sync_error.message.empty())
				std::fprintf(stderr, "warning: %s\n", sync_error.message.c_str());
		} else if (::unlink(ctx.real(c.path).c_str()) < 0 && errno != ENOENT) {
			r = fail(last_errno_error("Failed to remove " + c.path));
		}
		if (r) {
			if (changed)
				done.push_back(c.path);
			continue;
		}
		std::string undone;
		for (std::size_t k = i; k-- > 0;)
			if (std::find(done.begin(), done.end(), changes[k].path) != done.end()) {
				auto back = put_back(ctx, changes[k], before[k]);
				undone += (back ? "; put back " : "; and failed to put back ") + changes[k].path;
			}
		Error e = with_context(r.error(), "Failed to write " + c.path);
		e.message += undone;
		return fail(std::move(e));
	}
	return done;
}

}  // namespace unbounded::host
