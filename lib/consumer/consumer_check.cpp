#include "consumer_check.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "confined_open.hpp"
#include "containerd.hpp"
#include "containerd_config.hpp"
#include "foreign_spec.hpp"
#include "message_ids.hpp"
#include "side_specs.hpp"
#include "toml_reader.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <dirent.h>
#include <functional>
#include <optional>
#include <set>
#include <unistd.h>

namespace unbounded {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// What a directory a pod can write may cost: the CDI library reads every .json and .yaml file there,
// we read at most this many per directory, each within MAX_SPEC_BYTES, and check the hostPaths of at
// most MAX_CHECKED foreign specs, all within one time budget.
constexpr std::size_t MAX_SPECS_PER_DIR = 256;
constexpr std::size_t MAX_CHECKED = 64;
constexpr std::chrono::milliseconds SCAN_BUDGET{1000};
constexpr std::size_t OWN_SPEC_CAP = 16u << 20;  // ours: 6,000 IMEX channels are 2.1 MB
constexpr std::string_view DRA_PREFIX = "k8s.gpu.nvidia.com-claim_";

struct SpecFile : SpecFacts {
	std::size_t dir = 0;  // index in the directory list: a later one wins
	std::string path;     // as the machine sees it
	std::string name;
	bool ours = false;
};

// A file not ours that names kinds (ForeignSpec::kinds).
struct ForeignFile {
	std::size_t dir = 0;
	std::string path;
	std::set<std::string> kinds;
};

std::string join_dirs(const std::vector<std::string> &dirs)
{
	std::string out;
	for (const auto &d : dirs)
		out += (out.empty() ? "" : ", ") + printable(d);
	return out;
}

void add(ConsumerReport &out, const char *check, const char *id, std::string path, std::string message, bool warning = false)
{
	out.findings.push_back(ConsumerFinding{check, id, Problem{std::move(path), std::move(message)}, warning});
}

class SpecScan {
public:
	SpecScan(const Context &ctx, std::vector<std::string> dirs, ConsumerReport &out, const KnownSpecs *known)
		: dirs_(std::move(dirs)), out_(out), deadline_(Clock::now() + SCAN_BUDGET),
		  root_(open_machine_root(ctx))
	{
		ours_.insert(normalize_run_path(ctx.config.cdi_spec));
		for (const auto &side : side_specs(ctx.config))
			ours_.insert(normalize_run_path(*side.path));
		if (known)
			for (const auto &[path, facts] : *known)
				known_[normalize_run_path(path)] = &facts;
	}

	std::vector<SpecFile> specs;                                          // ours, as read or known
	std::vector<ForeignFile> foreign_kinds;                               // the files not ours that name a kind
	const ReadSpecFile *already_read = nullptr;                           // its bytes are taken, not read again
	std::function<void(const SpecFile &, const ordered_json &)> foreign;  // called for each file not ours that was read

	void run()
	{
		for (std::size_t i = 0; i < dirs_.size() && root_; i++)
			read_dir(i);
	}

	bool out_of_time() const { return Clock::now() > deadline_; }

private:
	void read_dir(std::size_t index)
	{
		const std::string &dir = dirs_[index];
		if (symlinked_dir(dir))
			return;
		auto fd = open_confined(root_.get(), dir, ConfinedOpen{Confinement::InRoot, O_RDONLY | O_DIRECTORY, true});
		if (!fd)
			return;  // a directory that is not there holds no spec
		std::size_t total = 0;
		std::vector<std::string> odd;
		auto names = bounded_listing(fd->get(), total, odd);
		if (!names)
			return;
		// Past the names read whole, a FIFO or device still hangs the library: its type is cheap.
		for (const auto &n : odd) {
			if (std::binary_search(names->begin(), names->end(), n))
				continue;  // read whole below, judged there
			const std::string path = fs::join(dir, n);
			auto entry = open_confined(root_.get(), path, ConfinedOpen{Confinement::InRoot, O_PATH, true, &steps_});
			struct stat st = {};
			if (entry && ::fstat(entry->get(), &st) == 0)
				blocks(path, st);
		}
		// A file verify did not read may be the one that shadows ours: not ready, as for one it
		// cannot parse (a pod that fills the directory must not hide a spec behind the rest).
		if (total > names->size())
			add(out_, "cdi-scan", message_id::CDI_SPEC_SHADOWED, printable(dir),
			    dir + " holds " + (total == SIZE_MAX ? std::string("more") : std::to_string(total)) +
				    " CDI specs: verify read only the first " + std::to_string(names->size()) +
				    " by name and cannot tell whether the others shadow ours. Remove the ones a pod wrote");
		for (std::size_t k = 0; k < names->size(); k++) {
			if (out_of_time()) {
				add(out_, "cdi-scan", message_id::CDI_SPEC_SHADOWED, printable(dir),
				    "Stopped reading the CDI specs in " + dir + " after " + std::to_string(k) +
					    " of them (more than the time budget for files a pod can write): cannot tell whether the "
					    "others shadow ours. Remove the ones a pod wrote");
				return;
			}
			read_spec(index, (*names)[k]);
		}
	}

	// The CDI library's walk takes the directory by lstat(): one that is itself a symlink is a file to
	// it, and none of its specs is read. A problem when ours is there.
	bool symlinked_dir(const std::string &dir)
	{
		auto parent = open_confined(root_.get(), fs::dirname(dir), ConfinedOpen{Confinement::InRoot, O_PATH | O_DIRECTORY, true});
		struct stat st = {};
		if (!parent || ::fstatat(parent->get(), fs::basename(dir).c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
			return false;
		for (const auto &o : ours_)
			if (normalize_run_path(fs::dirname(o)) == normalize_run_path(dir))
				add(out_, "cdi-spec-dirs", message_id::CONTAINERD_CDI_OFF, printable(dir),
				    dir + " is a symlink: the CDI library does not read a spec directory that is one, and containerd never sees " +
					    o + ". Make it a directory (or name its target in cdi_spec_dirs)");
		return true;
	}

	// The directory's spec names, streamed: at most MAX_SPECS_PER_DIR kept (the smallest by name, as
	// the CDI library reads them in order) whatever a pod created there, within the time budget.
	// `total` counts the spec names seen (SIZE_MAX when the budget ran out first).
	// `odd`: the spec names whose entries are not plain files or directories (FIFOs, devices, links),
	// at most MAX_SPECS_PER_DIR of them, for blocks() past the names read whole.
	std::optional<std::vector<std::string>> bounded_listing(int dirfd, std::size_t &total, std::vector<std::string> &odd)
	{
		UniqueFd d(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		if (!d)
			return std::nullopt;
		std::vector<std::string> heap;  // a max-heap of the smallest names seen
		alignas(8) char buf[32768];
		for (;;) {
			const ssize_t n = ::getdents64(d.get(), buf, sizeof buf);
			if (n <= 0)
				break;
			for (ssize_t off = 0; off < n;) {
				const auto *e = reinterpret_cast<const struct dirent64 *>(buf + off);
				off += e->d_reclen;
				const std::string_view name(e->d_name);
				// Every .json and .yaml name, dot-files and a bare ".json" too (filepath.Ext).
				if (!cdi_library_reads(name) || name == "." || name == "..")
					continue;
				total++;
				if (e->d_type != DT_REG && e->d_type != DT_DIR && odd.size() < MAX_SPECS_PER_DIR)
					odd.emplace_back(name);
				if (heap.size() < MAX_SPECS_PER_DIR) {
					heap.emplace_back(name);
					std::push_heap(heap.begin(), heap.end());
				} else if (name < heap.front()) {
					std::pop_heap(heap.begin(), heap.end());
					heap.back() = std::string(name);
					std::push_heap(heap.begin(), heap.end());
				}
			}
			if (out_of_time()) {
				total = SIZE_MAX;
				break;
			}
		}
		std::sort_heap(heap.begin(), heap.end());
		return heap;
	}

	void read_spec(std::size_t index, const std::string &name)
	{
		SpecFile s;
		s.dir = index;
		s.name = name;
		s.path = fs::join(dirs_[index], name);
		s.ours = ours_.count(normalize_run_path(s.path)) > 0;
		if (auto k = known_.find(normalize_run_path(s.path)); s.ours && k != known_.end()) {
			if (*k->second) {  // else a spec the CDI library skips
				static_cast<SpecFacts &>(s) = **k->second;
				specs.push_back(std::move(s));
			}
			return;
		}
		// The CDI library follows symlinks; so do we, inside the machine root, never blocking, and
		// only into a regular file of bounded size.
		// A device node a privileged pod made (or a link to one) is never opened for reading: O_PATH
		// first, its type from fstat, then a reopen of that very file.
		// Read without following a symlink (snapshot.cpp); a link the library follows is opened here.
		if (already_read && normalize_run_path(already_read->path) == normalize_run_path(s.path) &&
		    (*already_read->text || already_read->text->error().errnum != ELOOP)) {
			take_text(s, *already_read->text);
			return;
		}
		auto path_fd = open_confined(root_.get(), s.path, ConfinedOpen{Confinement::InRoot, O_PATH, true, &steps_});
		if (!path_fd) {
			// Not there (a dangling link): the library skips it too. Anything else (a link through
			// /proc's magic links, which the library follows and we do not; a loop; the budget of
			// path steps spent) is a file verify did not read.
			if (path_fd.error().errnum != ENOENT && !s.ours)
				unjudged(s.path, path_fd.error().message);
			return;
		}
		struct stat st = {};
		if (::fstat(path_fd->get(), &st) < 0 || blocks(s.path, st) || !S_ISREG(st.st_mode))
			return;  // a directory or socket: the library's read fails at once, and it goes on
		UniqueFd fd(::open(("/proc/self/fd/" + std::to_string(path_fd->get())).c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
		if (!fd) {
			if (!s.ours)
				unjudged(s.path, "it could not be opened again for reading (" + std::string(std::strerror(errno)) + ")");
			return;
		}
		if (auto regular = fs::require_regular(fd.get(), s.path); !regular) {
			if (!s.ours)
				unjudged(s.path, regular.error().message);  // replaced since the type was read
			return;
		}
		take_text(s, fs::read_fd(fd.get(), s.path, s.ours ? OWN_SPEC_CAP : MAX_SPEC_BYTES));
	}

	// An entry the CDI library opens and reads to its end with a blocking read, under the lock every
	// container creation takes: a FIFO (no writer: it waits for ever) or a device (/dev/zero never ends,
	// and containerd grows until it is killed), or a link to one. A pod that can write the directory
	// made it. Judged by `st`, its type (read through an O_PATH fd, which opens nothing).
	bool blocks(const std::string &path, const struct stat &st)
	{
		if (!(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
			return false;
		const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : "a device node";
		add(out_, "cdi-blocking", message_id::CDI_SPEC_SHADOWED, printable(path),
		    printable(path) + " is " + what + " (or a link to one): the CDI library reads every spec file " +
			    "to its end under the lock each container creation takes, so containerd hangs or runs out of memory "
			    "there and no pod gets a GPU. Remove it");
		return true;
	}

	void take_text(SpecFile &s, const Result<std::string> &text)
	{
		if (!text) {
			if (text.error().errnum == EFBIG && !s.ours)
				unjudged(s.path, "it is larger than the " + std::to_string(MAX_SPEC_BYTES >> 20) + " MiB verify reads of a spec");
			else if (text.error().errnum != ENOENT && !s.ours)
				unjudged(s.path, text.error().message);  // the library's read may well succeed
			return;
		}
		if (s.ours) {
			if (auto facts = spec_facts(*text, s.path)) {
				static_cast<SpecFacts &>(s) = std::move(*facts);
				specs.push_back(std::move(s));
			}
			return;
		}
		ForeignSpec v = judge_foreign_spec(*text, s.path);
		if (v.verdict == ForeignSpec::Verdict::Unreadable) {
			unjudged(s.path, v.reason);
			return;
		}
		if (v.verdict == ForeignSpec::Verdict::Crashes) {
			add(out_, "cdi-crash", message_id::CDI_SPEC_SHADOWED, printable(s.path),
			    printable(s.path) + " can crash the CDI library (" + printable(v.reason) +
				    "): containerd goes down when it reads its CDI specs, and no pod gets a GPU. Remove it");
			return;
		}
		if (foreign && v.document.is_object())
			foreign(s, v.document);  // the document is not kept: one spec's memory at a time
		if (!v.kinds.empty())
			foreign_kinds.push_back(ForeignFile{s.dir, s.path, std::move(v.kinds)});
	}

	// A spec the library may read but verify cannot judge: not ready, naming it (never a silent pass).
	void unjudged(const std::string &path, const std::string &why)
	{
		add(out_, "unjudged", message_id::CDI_SPEC_SHADOWED, printable(path),
		    "Cannot tell whether " + printable(path) + " shadows our CDI devices: " + printable(why) +
			    ". The CDI library reads it; remove it or make it a plain spec");
	}

	std::vector<std::string> dirs_;
	ConsumerReport &out_;
	const Clock::time_point deadline_;
	const UniqueFd root_;
	std::set<std::string> ours_;
	std::map<std::string, const std::optional<SpecFacts> *> known_;  // normalised path: what the caller knows
	std::uint64_t steps_ = 200000;                                   // path components for all the opens of one scan (ConfinedOpen::steps)
};

std::string runtime_name(const ContainerdView &v) { return v.runtime == "cri-o" ? "CRI-O" : "containerd"; }

// Whether `path` names anything in the machine (lstat, its directory opened inside the root).
bool exists_in_root(const Context &ctx, const std::string &path)
{
	const UniqueFd root = open_machine_root(ctx);
	auto dir = root ? open_confined(root.get(), fs::dirname(path), ConfinedOpen{Confinement::InRoot, O_PATH | O_DIRECTORY, true})
			: fail(Error{});
	struct stat st = {};
	return dir && ::fstatat(dir->get(), fs::basename(path).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// cdi_spec_dirs must hold our spec's directory, or containerd never reads the spec.
// Our spec's directory, and the device plugin's when it has written its spec there (its cdi-cri and
// cdi-annotations strategies name its devices, which the runtime finds only there).
void check_spec_dir_listed(const ContainerdView &v, const Context &ctx, ConsumerReport &out)
{
	auto needs = [&](const std::string &spec, const std::string &whose) {
		const std::string dir = fs::dirname(spec);
		if (std::any_of(v.cdi_spec_dirs.begin(), v.cdi_spec_dirs.end(),
				[&](const std::string &d) { return normalize_run_path(d) == normalize_run_path(dir); }))
			return;
		const std::string file = v.cdi_spec_dirs_from.starts_with("/") ? v.cdi_spec_dirs_from : v.config;
		add(out, "cdi-spec-dirs", message_id::CONTAINERD_CDI_OFF, file,
		    runtime_name(v) + " reads CDI specs from " + join_dirs(v.cdi_spec_dirs) + " (cdi_spec_dirs in " + printable(file) +
			    "), not from " + dir + " where " + whose + spec + " is: add it to cdi_spec_dirs under " + v.cdi_section);
	};
	needs(ctx.config.cdi_spec, "");
	if (exists_in_root(ctx, ctx.config.device_plugin_spec))
		needs(ctx.config.device_plugin_spec, "the NVIDIA device plugin's spec ");
}

void check_containerd(const ContainerdView &v, const Context &ctx, ConsumerReport &out)
{
	ordered_json &j = out.containerd;
	j["found"] = v.found;
	if (!v.found)
		return;
	j["runtime"] = v.runtime;
	j["version"] = v.version ? ordered_json(v.version->text) : ordered_json(nullptr);
	j["version_source"] = v.version_source;
	j["config"] = v.config;
	j["config_files"] = v.config_files;
	j["cdi_enabled"] = v.cdi_enabled ? ordered_json(*v.cdi_enabled) : ordered_json(nullptr);
	j["cdi_enabled_from"] = v.cdi_enabled_from;
	j["cdi_spec_dirs"] = v.cdi_spec_dirs;
	j["max_cdi_version"] = v.max_cdi_version.empty() ? ordered_json(nullptr) : ordered_json(v.max_cdi_version);
	j["max_cdi_version_from"] = v.max_cdi_version.empty() ? ordered_json(nullptr) : ordered_json(v.max_cdi_version_from);
	for (const auto &w : v.warnings)
		add(out, "containerd-config", message_id::CONTAINERD_CONFIG_UNKNOWN, v.config, w, true);
	if (v.version && v.max_cdi_version.empty()) {
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, v.version_source,
		    "containerd " + v.version->text + " has no CDI support (" + v.version_source +
			    "): pods get no GPU from " + ctx.config.cdi_spec + "; CDI needs containerd 1.7 or later");
		return;
	}
	j["config_refused"] = v.refused.empty() ? ordered_json(nullptr) : ordered_json(printable(v.refused));
	if (!v.refused.empty()) {
		add(out, "config-refused", message_id::CONTAINERD_CDI_OFF, printable(v.refused_file),
		    runtime_name(v) + " " + (v.version ? v.version->text : std::string("(version unknown)")) + " refuses its configuration (" +
			    printable(v.refused) + "): it does not start, and no pod runs. Fix " + printable(v.refused_file) +
			    (v.runtime == "cri-o" ? std::string() : " (containerd --config " + v.config + " config dump says what it reads)"));
		return;
	}
	j["cri_disabled"] = v.cri_disabled.empty() ? ordered_json(nullptr) : ordered_json(printable(v.cri_disabled));
	j["cdi_table_disabled"] = v.cdi_table_disabled;
	j["config_ambiguous"] = v.config_ambiguous;
	if (v.config_ambiguous) {
		const std::string file = v.refused_file.empty() ? v.config : v.refused_file;
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, file,
		    !v.ambiguous_why.empty() ? printable(v.ambiguous_why) + ": whether it uses CDI is not known. Give every file version = 2 or 3"
					     : "containerd's configuration names one CRI table twice in a version-1 file (" + printable(file) +
						       ": [plugins.cri] and its URI), and containerd " + (v.version ? v.version->text : std::string()) +
						       " keeps either one from start to start: whether it uses CDI is not fixed. Keep one of the two");
		return;
	}
	if (!v.cri_disabled.empty()) {
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, v.config,
		    "containerd's configuration disables its CRI plugin " + printable(v.cri_disabled) +
			    " (disabled_plugins): kubelet gets no container runtime from it and no pod runs. Remove it from disabled_plugins");
		return;
	}
	j["cri_fails"] = v.cri_fails.empty() ? ordered_json(nullptr) : ordered_json(printable(v.cri_fails));
	if (!v.cri_fails.empty()) {
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, v.config,
		    "containerd's CRI plugin does not load with its configuration (" + printable(v.cri_fails) +
			    "): containerd starts without it, kubelet gets no container runtime from it and no pod runs. Fix " +
			    printable(v.config) + " (containerd --config " + v.config + " config dump says what it reads)");
		return;
	}
	// containerd 2.3 deprecates enable_cdi: off, a pod's CDI request is an error; the key goes away.
	const bool deprecated = v.version && (v.version->major > 2 || (v.version->major == 2 && v.version->minor >= 3));
	if (v.cdi_enabled && !*v.cdi_enabled && deprecated) {
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, v.config,
		    "enable_cdi = false in containerd's configuration (" + printable(v.cdi_enabled_from) + "): containerd " + v.version->text +
			    " deprecates the key and fails every pod that asks for a CDI device, GPU pods included. Remove the line from " +
			    printable(v.config) + " or the file it imports that sets it, and restart containerd");
		return;
	}
	if (v.cdi_enabled && !*v.cdi_enabled) {
		add(out, "cdi-disabled", message_id::CONTAINERD_CDI_OFF, v.config,
		    "CDI is off in containerd " + (v.version ? v.version->text : std::string("(version unknown)")) + " (" +
			    printable(v.cdi_enabled_from) + "): pods get no GPU from " + ctx.config.cdi_spec + ". Set enable_cdi = true under " +
			    v.cdi_section + " in " + printable(v.config) + " (or the file it imports that sets that table last) and restart containerd");
	}
	check_spec_dir_listed(v, ctx, out);
}

// What a spec of that cdiVersion needs, for the advice.
std::string runtime_needed(const ContainerdView &v, const std::string &cdi_version)
{
	if (!v.cdi_library.empty())
		return "a containerd built with CDI library " + cdi_version.substr(0, cdi_version.rfind('.')) + " or later";
	const std::string first = first_containerd_for(cdi_version);
	return first.empty() ? "a containerd newer than any this check knows" : "containerd " + first + " or later";
}

void check_versions(const ContainerdView &v, const std::vector<SpecFile> &specs, ConsumerReport &out)
{
	if (v.max_cdi_version.empty())
		return;
	for (const auto &s : specs)
		if (s.ours && !s.cdi_version.empty() && compare_cdi_versions(s.cdi_version, v.max_cdi_version) > 0)
			add(out, "cdi-version", message_id::CDI_VERSION_REFUSED, s.path,
			    s.path + " has cdiVersion " + printable(s.cdi_version) + " but " + runtime_name(v) + " " + v.version->text + " (" +
				    v.version_source + ") accepts at most " + v.max_cdi_version +
				    (v.cdi_library.empty() ? std::string() : " (built with CDI library " + printable(v.cdi_library) + ")") +
				    ": it refuses the spec and pods get none of its devices; that spec needs " +
				    runtime_needed(v, printable(s.cdi_version)));
}

// A file not ours that names the kind of one of our specs is a conflict, whatever the library makes
// of the rest of it: where their device names meet, the later directory's spec wins and two of one
// directory drop the name (the library's cache.go); and a device it adds under our kind is not ours.
// Said by where it stands, never by a model of which names the library would take from it.
void check_shadowing(const std::vector<SpecFile> &ours, const std::vector<ForeignFile> &foreign, ConsumerReport &out)
{
	for (const auto &o : ours) {
		if (!o.ours || o.kind.empty())
			continue;
		for (const auto &f : foreign) {
			if (!f.kinds.count(o.kind))
				continue;
			const char *directory = f.dir > o.dir ? "later" : f.dir == o.dir ? "same"
											 : "earlier";
			out.shadowing.push_back(
				ordered_json{{"file", printable(f.path)}, {"ours", o.path}, {"kind", printable(o.kind)}, {"directory", directory}});
			const std::string head = printable(f.path) + " is a CDI spec of kind " + printable(o.kind) + ", as " + o.path + " is";
			std::string msg;
			if (f.dir > o.dir)
				msg = head + ", in a later CDI directory, and wins: the CDI library serves pods its devices, not ours, wherever "
					     "their names meet. Remove it (nvidia-cdi-refresh writes /var/run/cdi/nvidia.yaml; mask it)";
			else if (f.dir == o.dir)
				msg = head + ", in the same directory: the CDI library drops both where their device names meet (two specs of one "
					     "directory conflict), and pods asking for them fail. Remove it";
			else
				msg = head + ": ours wins where their device names meet (a later CDI directory), but a device it adds under our "
					     "kind is not ours, and a change of cdi_spec_dirs hands pods its devices. Remove it";
			add(out, "shadowed", message_id::CDI_SPEC_SHADOWED, printable(f.path), std::move(msg));
		}
	}
}

bool under(std::string_view path, std::string_view root)
{
	return path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/';
}

// Whether any mount of the spec, top-level or of a device, has its hostPath under `root`.
bool mounts_under(const ordered_json &doc, const std::string &root)
{
	bool found = false;
	for_each_edits(doc, [&](const ordered_json &e) {
		if (found || !e.contains("mounts") || !e["mounts"].is_array())
			return;
		found = std::any_of(e["mounts"].begin(), e["mounts"].end(), [&](const ordered_json &m) {
			return m.is_object() && m.contains("hostPath") && m["hostPath"].is_string() && under(m["hostPath"].get<std::string>(), root);
		});
	});
	return found;
}

// The DRA driver's per-claim specs, and any other spec that mounts files of the driver root (a
// writer we do not know of): checked like the device plugin's, as warnings naming the claim.
class DraCheck {
public:
	DraCheck(const Context &ctx, SpecScan &scan, ConsumerReport &out) : ctx_(ctx), scan_(scan), out_(out) {}

	void operator()(const SpecFile &s, const ordered_json &doc)
	{
		const bool claim = s.name.starts_with(DRA_PREFIX);
		// The device plugin's own spec has its check, and its own advice (verify_command.cpp).
		if (!claim && (normalize_run_path(s.path) == normalize_run_path(ctx_.config.device_plugin_spec) ||
			       !mounts_under(doc, ctx_.config.driver_root)))
			return;
		claims_ += claim;
		if (checked_ == MAX_CHECKED || scan_.out_of_time()) {
			if (!said_)
				add(out_, "dra-stale", message_id::DRA_CLAIM_SPEC_STALE, printable(s.path),
				    "Not checking the hostPaths of " + printable(s.path) + " and the specs after it: more than " +
					    std::to_string(MAX_CHECKED) + " specs that use the driver root, or out of time",
				    true);
			said_ = true;
			return;
		}
		checked_++;
		const std::string uid = claim ? printable(s.name.substr(DRA_PREFIX.size(), s.name.size() - DRA_PREFIX.size() - 5)) : "";
		// The DRA driver's kubelet plugin rewrites its spec's paths from /driver-root to its
		// nvidiaDriverRoot (cmd/gpu-kubelet-plugin/cdi.go), "/" unless told.
		if (auto w = claim ? generated_from_another_root(doc, ctx_.config.driver_root) : std::nullopt; w && !w->device_node) {
			const std::string why = "it mounts " + printable(w->host_path) + ", outside " + ctx_.config.driver_root;
			stale_.push_back(ordered_json{{"file", printable(s.path)}, {"claim", uid}, {"problem", why}});
			add(out_, "dra-stale", message_id::DRA_CLAIM_SPEC_STALE, printable(s.path),
			    "The CDI spec of the DRA claim " + uid + " was generated from another driver root: " + why +
				    ". Set the DRA driver's Helm value nvidiaDriverRoot (NVIDIA_DRIVER_ROOT of its kubelet plugins) to " +
				    ctx_.config.driver_root,
			    true);
			return;
		}
		std::vector<Problem> problems;
		check_cdi_host_paths(ctx_, doc, printable(s.path), problems, FOREIGN_SPEC_BUDGET);
		if (problems.empty())
			return;
		stale_.push_back(ordered_json{{"file", printable(s.path)}, {"claim", claim ? ordered_json(uid) : ordered_json(nullptr)}, {"problem", problems.front().message}});
		add(out_, "dra-stale", message_id::DRA_CLAIM_SPEC_STALE, printable(s.path),
		    "The CDI spec of " + (claim ? "the DRA claim " + uid : printable(s.path)) + " is stale: " + problems.front().message +
			    (claim ? ". Its pod fails to start until the DRA driver prepares the claim again (delete the pod)" : ""),
		    true);
	}

	ordered_json result() const { return ordered_json{{"claim_specs", claims_}, {"checked", checked_}, {"stale", stale_}}; }
	std::size_t claims() const { return claims_; }

private:
	const Context &ctx_;
	SpecScan &scan_;
	ConsumerReport &out_;
	std::size_t claims_ = 0, checked_ = 0;
	bool said_ = false;
	ordered_json stale_ = ordered_json::array();
};

// The CDI library takes a file at this path, when there is one, as the schema every spec must pass,
// in every runtime that links it: a spec it refuses serves no device, whatever verify makes of it.
constexpr const char *SCHEMA_OVERRIDE = "/etc/cdi/schema/schema.json";

void check_schema_override(const Context &ctx, ConsumerReport &out)
{
	if (!exists_in_root(ctx, SCHEMA_OVERRIDE))
		return;
	add(out, "cdi-schema", message_id::CDI_SPEC_SHADOWED, SCHEMA_OVERRIDE,
	    std::string(SCHEMA_OVERRIDE) + " exists: the CDI library of containerd, CRI-O and podman validates every spec against it instead of "
					   "its own schema, and refuses what it refuses; verify cannot tell which specs pass. Remove it");
}

// nvidia-container-runtime's configuration (nvidia-container-toolkit's api/config/v1/config.go and
// runtime.go: one file, its path fixed unless the runtime's environment moves it). It decides what a
// pod it runs that names its GPUs in NVIDIA_VISIBLE_DEVICES gets: our spec only with mode "cdi" (the
// default "auto" is jit-cdi on a GPU machine since 1.18, internal/info/auto.go, a spec it makes
// itself), modes.cdi.spec-dirs holding our directory and modes.cdi.default-kind our kind (the
// names it qualifies, internal/modifier/cdi.go). Warnings: pods of the device plugin's CDI
// strategies, and of the DRA driver, never pass through it.
constexpr const char *NVIDIA_RUNTIME_CONFIG = "/etc/nvidia-container-runtime/config.toml";

void check_nvidia_runtime(const Context &ctx, ConsumerReport &out)
{
	const std::string file = NVIDIA_RUNTIME_CONFIG;
	auto warn = [&](const std::string &message) {
		add(out, "nvidia-runtime", message_id::NVIDIA_RUNTIME_NOT_OURS, file, printable(message), true);
	};
	const UniqueFd root = open_machine_root(ctx);
	if (!root)
		return;
	auto text = read_runtime_config(root.get(), file, 1u << 20);
	auto doc = text ? parse_toml_bounded(*text, file, ParseLimits{32, 100000}) : fail(text.error());
	if (!doc) {
		if (doc.error().errnum != ENOENT)
			warn(file + " cannot be read (" + doc.error().message + "): nvidia-container-runtime fails on it, and on every pod it runs");
		return;
	}
	const nlohmann::json *mode = table_at(*doc, {"nvidia-container-runtime", "mode"});
	const std::string m = mode && mode->is_string() ? mode->get<std::string>().substr(0, 64) : "auto";
	const std::string pods = ": a pod it runs that names its GPUs in NVIDIA_VISIBLE_DEVICES (the device plugin's envvar strategy, "
				 "the GPU Operator's own pods) ";
	if (m != "cdi") {
		warn("nvidia-container-runtime's mode is \"" + m + "\" in " + file + pods +
		     "gets what that mode builds itself (\"auto\" is jit-cdi from nvidia-container-toolkit 1.18: a spec made from "
		     "nvidia-container-cli.root), not " +
		     ctx.config.cdi_spec + ": set mode = \"cdi\" under [nvidia-container-runtime]");
		return;
	}
	const nlohmann::json *cdi = table_at(*doc, {"nvidia-container-runtime", "modes", "cdi"});
	const std::string ours = normalize_run_path(fs::dirname(ctx.config.cdi_spec));
	if (const nlohmann::json *dirs = cdi ? table_at(*cdi, {"spec-dirs"}) : nullptr;
	    dirs && !(dirs->is_array() && std::any_of(dirs->begin(), dirs->end(), [&](const nlohmann::json &d) {
			      return d.is_string() && normalize_run_path(d.get<std::string>()) == ours;
		      })))
		warn("nvidia-container-runtime.modes.cdi.spec-dirs in " + file + " does not list " + fs::dirname(ctx.config.cdi_spec) + pods +
		     "gets none of " + ctx.config.cdi_spec + "'s devices: add it there");
	if (const nlohmann::json *kind = cdi ? table_at(*cdi, {"default-kind"}) : nullptr; kind && !(kind->is_string() && *kind == CDI_KIND))
		warn("nvidia-container-runtime.modes.cdi.default-kind in " + file + " is not " + CDI_KIND + pods +
		     "gets devices of that kind, not " + ctx.config.cdi_spec + "'s: set it to " + CDI_KIND + " or remove it");
}

}  // namespace

std::size_t ConsumerReport::count(std::string_view check) const
{
	return static_cast<std::size_t>(std::count_if(findings.begin(), findings.end(), [&](const auto &f) { return f.check == check; }));
}

SpecFacts spec_facts(const CdiSpec &spec) { return SpecFacts{spec.kind(), spec.cdi_version}; }

// Our own spec, root's file in /etc/cdi, as large as what we generate (6,000 IMEX channels): read
// with our limits.
std::optional<SpecFacts> spec_facts(const std::string &text, const std::string &path)
{
	auto doc = parse_yaml_bounded(text, path, ParseLimits{32, 4000000});
	if (!doc || !doc->is_object())
		return std::nullopt;
	auto str = [&](const char *key) {
		return doc->contains(key) && (*doc)[key].is_string() ? (*doc)[key].get<std::string>() : std::string();
	};
	return SpecFacts{str("kind"), str("cdiVersion")};
}

ConsumerReport check_consumer(const Context &ctx, const KnownSpecs *known, const ReadSpecFile *read, bool ask_runtime)
{
	ConsumerReport out;
	const ContainerdView view = read_containerd(ctx, ask_runtime);
	check_containerd(view, ctx, out);
	// Without containerd the CDI library's defaults, which CRI-O and podman share.
	SpecScan scan(ctx, view.found ? view.cdi_spec_dirs : std::vector<std::string>{"/etc/cdi", "/var/run/cdi"}, out, known);
	scan.already_read = read;
	DraCheck dra(ctx, scan, out);
	scan.foreign = [&](const SpecFile &s, const ordered_json &doc) { dra(s, doc); };
	scan.run();
	check_schema_override(ctx, out);
	check_nvidia_runtime(ctx, out);
	check_versions(view, scan.specs, out);
	check_shadowing(scan.specs, scan.foreign_kinds, out);
	out.dra = dra.result();
	out.dra_claim_specs = dra.claims();
	return out;
}

}  // namespace unbounded
