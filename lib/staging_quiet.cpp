#include "staging_quiet.hpp"

#include "discovery_cache.hpp"
#include "staging.hpp"
#include "staging_layout.hpp"

#include <algorithm>
#include <chrono>
#include <sys/stat.h>
#include <thread>

namespace unbounded {
namespace {

void add(StagingStamp &s, int fd)
{
	struct stat st{};
	if (fd < 0 || ::fstat(fd, &st) < 0)
		return;
	s.identity += identity_key(st) + ";";
	if (st.st_ctim.tv_sec > s.newest.tv_sec || (st.st_ctim.tv_sec == s.newest.tv_sec && st.st_ctim.tv_nsec > s.newest.tv_nsec))
		s.newest = st.st_ctim;
}

Millis since(const struct timespec &t)
{
	struct timespec now{};
	::clock_gettime(CLOCK_REALTIME, &now);
	const long long ms = (static_cast<long long>(now.tv_sec) - t.tv_sec) * 1000 + (now.tv_nsec - t.tv_nsec) / 1'000'000;
	return Millis(ms);
}

}  // namespace

StagingStamp stamp_staging(const Context &ctx)
{
	StagingStamp s;
	const std::string parent = ctx.real(ctx.config.staging);
	if (auto pfd = fs::open_dir(parent))
		add(s, pfd->get());
	auto staging = Staging::open(parent, ctx.config.staging, nullptr);
	if (!staging)
		return s;
	for (std::size_t t = 0; t < staging->trees().size(); t++) {
		s.identity += staging->trees()[t].display + "=";
		add(s, staging->trees()[t].fd.get());
		auto stamp_dir = [&](const char *dir) {
			if (!*dir)
				return;
			if (auto d = staging->open_dir(t, dir); d && *d)
				add(s, d->get());
		};
		for (const char *dir : staging_layout::SCAN_DIRS)
			stamp_dir(dir);
		for (const char *dir : staging_layout::FIRMWARE_DIRS)
			stamp_dir(dir);
	}
	return s;
}

QuietWait wait_for_quiet_staging(const Context &ctx, Millis settle, Millis limit)
{
	using clock = std::chrono::steady_clock;
	const auto start = clock::now();
	QuietWait w;
	for (;;) {
		w.stamp = stamp_staging(ctx);
		w.waited = std::chrono::duration_cast<Millis>(clock::now() - start);
		const Millis quiet = since(w.stamp.newest);
		if (quiet >= settle)
			return w;
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
