#include "staging_quiet.hpp"

#include "discovery_cache.hpp"
#include "nvidia_machine.hpp"
#include "staging.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <thread>

namespace unbounded {
namespace {

Millis since(const struct timespec &t)
{
	struct timespec now = {};
	::clock_gettime(CLOCK_REALTIME, &now);
	const long long ms = (static_cast<long long>(now.tv_sec) - t.tv_sec) * 1000 + (now.tv_nsec - t.tv_nsec) / 1'000'000;
	return Millis(ms);
}

}  // namespace

StagingWatch StagingWatch::open(const Context &ctx)
{
	StagingWatch w;
	w.real_parent_ = ctx.real(ctx.config.staging);
	w.display_parent_ = ctx.config.staging;
	return w;
}

namespace {

void add_to(StagingStamp &s, const std::string &name, const struct stat &st)
{
	s.identity += name + "=" + identity_key(st) + ";";
	if (st.st_ctim.tv_sec > s.newest.tv_sec || (st.st_ctim.tv_sec == s.newest.tv_sec && st.st_ctim.tv_nsec > s.newest.tv_nsec))
		s.newest = st.st_ctim;
}

// Stamps dir (a path of plain components below the tree) and each of its parents not yet stamped;
// a missing one ends its branch. `opened` holds the prefixes already stamped in this tree, each with
// its directory's fd (invalid when missing): the watched directories share their parents (nvidia/,
// nvidia/<flavour>/), which are opened once, not once per child.
void stamp_dir(StagingStamp &s, int tree_fd, const std::string &display, const std::string &dir, std::map<std::string, UniqueFd> &opened)
{
	int parent = tree_fd;
	std::string prefix;
	for (const auto &c : fs::split_path(dir)) {
		prefix += "/" + c;
		auto it = opened.find(prefix);
		if (it == opened.end()) {
			UniqueFd fd(::openat(parent, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
			struct stat st = {};
			if (fd && ::fstat(fd.get(), &st) == 0)
				add_to(s, display + prefix, st);
			it = opened.emplace(prefix, std::move(fd)).first;
		}
		if (!it->second)
			return;
		parent = it->second.get();
	}
}

}  // namespace

StagingStamp StagingWatch::stamp() const
{
	StagingStamp s;
	auto pfd = fs::open_dir(real_parent_);
	if (!pfd)
		return s;
	struct stat st = {};
	if (::fstat(pfd->get(), &st) == 0)
		add_to(s, display_parent_, st);
	auto names = fs::list_dir(pfd->get(), display_parent_);
	if (!names)
		return s;
	std::sort(names->begin(), names->end(), numeric_name_less);  // the order Staging::open gives
	for (const auto &n : *names) {
		if (!is_staging_entry(n))
			continue;
		UniqueFd tree(::openat(pfd->get(), n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (!tree || ::fstat(tree.get(), &st) < 0)
			continue;  // not a directory (or a symlink): not a staging tree
		const std::string display = fs::join(display_parent_, n);
		add_to(s, display, st);
		std::map<std::string, UniqueFd> opened;  // prefix -> its fd, invalid when missing
		for (const auto &dir : staging_layout::watched_dirs(tree.get()))
			stamp_dir(s, tree.get(), display, dir, opened);
		for (const char *dir : staging_layout::FIRMWARE_DIRS)
			stamp_dir(s, tree.get(), display, dir, opened);
	}
	return s;
}

QuietWait wait_for_quiet_staging(const Context &ctx, Millis settle, Millis limit)
{
	using clock = std::chrono::steady_clock;
	const auto start = clock::now();
	QuietWait w;
	for (bool napped = false;; napped = true) {
		w.watch = StagingWatch::open(ctx);  // afresh: trees and directories come and go
		w.stamp = w.watch.stamp();
		w.waited = std::chrono::duration_cast<Millis>(clock::now() - start);
		const Millis quiet = since(w.stamp.newest);
		if (quiet >= settle) {
			if (!napped)  // quiet at the first look: no wait, however long the look took (qemu: ms)
				w.waited = Millis(0);
			return w;
		}
		if (w.waited >= limit) {
			w.gave_up = true;
			return w;
		}
		// Sleep until the newest change is settle old (a change time in the future, from a clock
		// step, is waited out in settle-sized steps up to the limit).
		Millis nap = quiet < Millis(0) ? settle : settle - quiet;
		nap = std::min(std::max(nap, Millis(50)), limit - w.waited);
		std::this_thread::sleep_for(nap);
	}
}

}  // namespace unbounded
