#include "execute_specs.hpp"

#include "bounded_parse.hpp"
#include "dev_char.hpp"
#include "format.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "setup_report.hpp"
#include "spec_marker.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded {
namespace {

// One spec path (`key` in the configuration) may be overwritten: see check_spec_paths_hold_specs().
Result<void> check_holds_a_spec(const SpecRead &file, const char *key, const char *kind)
{
	const std::string &path = file.path;
	const std::string dir = fs::dirname(path);
	if (dir == "/etc/cdi" || dir == "/var/run/cdi" || dir == "/run/cdi")
		return {};
	auto text = file.bounded(MAX_SPEC_BYTES);
	if (!text) {
		if (text.error().errnum == ENOENT)
			return {};
		return fail(make_error("Refusing to replace " + path + " (" + key + "): " + text.error().message));
	}
	if (text->empty() || is_our_spec(*text) || text->find(kind) != std::string::npos)
		return {};
	return fail(make_error("Refusing to replace " + path + " (" + key + "): it exists and is not a CDI spec of kind " + kind +
			       "; point " + key + " at a file of its own"));
}

// Writes a spec next to where it goes, up to its rename; unchanged bytes (the snapshot's, with the
// mode we give it) are not rewritten.
Result<fs::PreparedWrite> prepare_spec_file(const Context &ctx, const SpecRead &old, const std::string &yaml)
{
	const std::string real = ctx.real(old.path);
	if (auto d = fs::mkdir_p(fs::dirname(real), 0755); !d)
		return fail(d.error());
	if (!old.text || *old.text != yaml || (old.mode & 07777) != 0644)
		return fs::prepare_file_atomic(real, yaml, {.mode = 0644, .fsync = true, .skip_if_unchanged = false});
	auto dir = fs::open_dir(fs::dirname(real));
	if (!dir)
		return fail(dir.error());
	// What prepare_file_atomic() does before its own unchanged test: temp files a killed run left go.
	fs::remove_matching(dir->get(), concat({".", fs::basename(real), ".tmp-"}));  // concat: GCC PR 105329 at -O3
	return fs::PreparedWrite{};
}

// A side spec of ours whose devices are gone is removed: the very file the snapshot read (not one
// that replaced it since), and only when it was ours. Absent, or anyone else's: left alone.
Result<bool> remove_our_side_spec(const Context &ctx, const SpecRead &old)
{
	if (!old.ours)
		return false;
	const std::string real = ctx.real(old.path);
	auto dir = fs::open_dir(fs::dirname(real));
	if (!dir)
		return dir.error().errnum == ENOENT ? Result<bool>(false) : fail(dir.error());
	const std::string name = fs::basename(real);
	struct stat now = {};
	if (::fstatat(dir->get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_dev != old.dev || now.st_ino != old.ino)
		return false;
	if (::unlinkat(dir->get(), name.c_str(), 0) < 0)
		return fail(last_errno_error("Failed to remove " + old.path));
	return true;
}

// Our specs as this run leaves them, for the consumer check after it.
void record_in_place(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi)
{
	report.specs_in_place.clear();
	report.specs_in_place[ctx.config.cdi_spec] = spec_facts(cdi.spec);
	for (const auto &[side, read] : snap.sides)
		if (const CdiSpec *spec = cdi.side(side.kind))
			report.specs_in_place[*side.path] = spec_facts(*spec);
		else if (!read.ours && read.text)
			report.specs_in_place[*side.path] = spec_facts(*read.text, *side.path);
}

// A side spec as this run leaves it: its new bytes prepared beside it, or nothing (the machine has
// none of its devices: removed if ours).
struct SideSpecWrite {
	const SideSpecRead &side;
	std::optional<fs::PreparedWrite> prepared;
};

// The side specs, each prepared (already) or removed, in side_specs() order.
Result<void> commit_side_specs(const Context &ctx, Report &report, const SpecForState &cdi, std::vector<SideSpecWrite> &writes)
{
	report.details["imex_channels"] = cdi.devices.imex_channels.size();
	for (auto &[read, prepared] : writes) {
		const SideSpec &side = read.spec;
		report.details[side.key] = *side.path;
		if (prepared) {
			const bool written = prepared->outcome() == fs::WriteOutcome::Written;
			report.details[std::string(side.key) + "_written"] = written;
			report.facts.files_changed |= written;
			if (auto r = prepared->commit(); !r)
				return fail(r.error());
			continue;
		}
		// The temp files a killed run left beside it go too, as a write of it would sweep them (a
		// run killed while it wrote the spec of channels gone since left one in /etc/cdi for good).
		const std::string real = ctx.real(*side.path);
		if (auto dir = fs::open_dir(fs::dirname(real)); dir)
			fs::remove_matching(dir->get(), concat({".", fs::basename(real), ".tmp-"}));
		auto removed = remove_our_side_spec(ctx, read.read);
		if (!removed)
			return fail(removed.error());
		if (*removed)
			log::notice("Removed " + *side.path + ": the machine has no " + side.what + " any more.",
				    {{"MESSAGE_ID", message_id::CDI_SPEC_REMOVED}, {"UNBOUNDED_NVIDIA_PATH", *side.path}});
	}
	return {};
}

}  // namespace

Result<void> check_spec_paths_hold_specs(const RunSnapshot &snap)
{
	if (auto r = check_holds_a_spec(snap.cdi_spec, "cdi_spec", CDI_KIND); !r)
		return r;
	for (const auto &[side, read] : snap.sides)
		if (auto r = check_holds_a_spec(read, side.key, side.kind); !r)
			return r;
	return {};
}

// All the specs: ours, and the side specs (side_specs.hpp: IMEX channels, NVSwitch, GDRCopy, GDS),
// each of which exists exactly while the machine has its devices (a spec of ours whose devices are
// gone is removed; one anyone else wrote is left alone).
// They change together or not at all, as far as a failure can decide it: every temp file is written
// before anything is renamed (a full /etc/cdi fails here, with every spec as it was), the side specs
// change first, and nvidia.yaml, the one that names the new driver root, is renamed last. A failure
// before that last rename leaves nvidia.yaml naming the previous root, which the caller then puts
// back; the side specs name only device nodes and machine files, never the root.
Result<fs::WriteOutcome> write_spec(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi)
{
	auto main_spec = prepare_spec_file(ctx, snap.cdi_spec, cdi.spec.yaml);
	if (!main_spec)
		return fail(main_spec.error());
	std::vector<SideSpecWrite> writes;
	writes.reserve(snap.sides.size());
	for (const SideSpecRead &side : snap.sides) {
		auto &write = writes.emplace_back(SideSpecWrite{side, std::nullopt});
		if (const CdiSpec *spec = cdi.side(side.spec.kind)) {
			auto p = prepare_spec_file(ctx, side.read, spec->yaml);
			if (!p)
				return fail(p.error());
			write.prepared = std::move(*p);
		}
	}
	if (auto r = commit_side_specs(ctx, report, cdi, writes); !r)
		return fail(r.error());

	// Once renamed, nvidia.yaml names the new root: a directory that then fails to sync must not
	// make the caller put the old root back under it (the next boot's run writes the spec again).
	const fs::WriteOutcome outcome = main_spec->outcome();
	Error sync_error;
	if (auto r = main_spec->commit(&sync_error); !r)
		return fail(r.error());
	if (!sync_error.message.empty())
		warn(report, {sync_error.message});
	record_in_place(ctx, report, snap, cdi);
	// Every node the specs name reachable by number, for runc's systemd cgroup driver (dev_char.hpp).
	auto links = ensure_dev_char_links(ctx, spec_device_nodes(cdi.devices));
	report.details["dev_char_links_created"] = links.created;
	report.details["dev_char_links_present"] = links.present;
	report.details["dev_char_links_removed"] = links.removed;
	report.facts.files_changed |= links.created || links.removed;
	warn(report, links.warnings);
	return outcome;
}

Result<void> write_spec_after_swap(const Context &ctx, Report &report, const RunSnapshot &snap, const SpecForState &cdi,
				   std::optional<PreviousRoot> &previous, InstallStats &stats)
{
	PhaseTimer t(report, "write_cdi");
	Result<fs::WriteOutcome> w = write_spec(ctx, report, snap, cdi);
	if (!w) {
		Error e = w.error();
		if (previous) {
			if (auto r = previous->rollback(); !r)
				e.message += "; and putting the previous driver root back failed: " + r.error().message;
			else
				e.message += "; the previous driver root was put back";
		}
		return fail(e);
	}
	report.details["cdi_spec_written"] = *w == fs::WriteOutcome::Written;
	report.facts.files_changed |= *w == fs::WriteOutcome::Written;
	if (previous)
		if (auto r = previous->commit(); !r) {
			// A mount inside the old tree: it stays aside, the next run tries again.
			warn(report, {r.error().message + "; the old driver root is left aside"});
			stats.stale_trees_kept++;
		}
	return {};
}

}  // namespace unbounded
