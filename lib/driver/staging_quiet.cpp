#include "staging_quiet.hpp"

#include "discovery_cache.hpp"
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
	struct timespec now{};
	::clock_gettime(CLOCK_REALTIME, &now);
	const long long ms = (static_cast<long long>(now.tv_sec) - t.tv_sec) * 1000 + (now.tv_nsec - t.tv_nsec) / 1'000'000;
	return Millis(ms);
}

}  // namespace

StagingWatch StagingWatch::open(const Context &ctx)
{
	StagingWatch w;
	const std::string parent = ctx.real(ctx.config.staging);
	if (auto pfd = fs::open_dir(parent))
		w.dirs_.emplace_back(ctx.config.staging, std::move(*pfd));
	auto staging = Staging::open(parent, ctx.config.staging, nullptr);
	if (!staging)
		return w;
	for (auto &tree : staging->trees()) {
		// Each directory prefix is opened once; a missing one ends its branch.
		std::map<std::string, int> opened;  // prefix -> fd (-1: missing)
		const std::string display = tree.display;
		const int root = tree.fd.get();
		w.dirs_.emplace_back(display, std::move(tree.fd));
		auto watch = [&](const char *dir) {
			int parent_fd = root;
			std::string prefix;
			for (const auto &c : fs::split_path(dir)) {
				prefix += "/" + c;
				auto it = opened.find(prefix);
				if (it == opened.end()) {
					int fd = ::openat(parent_fd, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
					if (fd >= 0)
						w.dirs_.emplace_back(display + prefix, UniqueFd(fd));
					it = opened.emplace(prefix, fd).first;
				}
				if (it->second < 0)
					return;
				parent_fd = it->second;
			}
		};
		for (const auto &dir : staging_layout::watched_dirs(root))
			watch(dir.c_str());
		for (const char *dir : staging_layout::FIRMWARE_DIRS)
			watch(dir);
	}
	return w;
}

StagingStamp StagingWatch::stamp() const
{
	StagingStamp s;
	for (const auto &[name, fd] : dirs_) {
		struct stat st{};
		if (::fstat(fd.get(), &st) < 0)
			continue;
		s.identity += name + "=" + identity_key(st) + ";";
		if (st.st_ctim.tv_sec > s.newest.tv_sec || (st.st_ctim.tv_sec == s.newest.tv_sec && st.st_ctim.tv_nsec > s.newest.tv_nsec))
			s.newest = st.st_ctim;
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
