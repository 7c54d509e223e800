// The copy pool: directories made once, files copied on a few threads, each copy checked against a
// source that changes while it is read.
#include "driver_root_steps.hpp"

#include "fs.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace unbounded {

namespace root_build {

namespace {

// The CPUs this process may run on (the unit's CPUAffinity=, a cgroup cpuset), at most 8: beyond that
// the copies are bound by memory bandwidth, and every thread is boot-path work of its own.
std::size_t copy_threads_for(std::size_t jobs)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	std::size_t cpus = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? static_cast<std::size_t>(CPU_COUNT(&set)) : 1;
	return std::max<std::size_t>(1, std::min({cpus, jobs, std::size_t(8)}));
}

bool same_content_stamp(const struct stat &a, const struct stat &b)
{
	return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
	       a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// Copies one staging file into dir/name. The source is re-checked after the copy (size, mtime and
// ctime, which no utimes() can restore): a host rewriting a library in place while we copy would
// give a torn file that still has the right size and mtime. Such a file is copied once more; a
// second torn copy fails the run.
Result<std::uint64_t> copy_source(const DriverFile &src, const ManifestEntry &e, int dirfd, const std::string &name,
				  const std::string &dest_display)
{
	for (int attempt = 0;; attempt++) {
		UniqueFd in(::openat(src.source.dir.get(), src.source.name.c_str(),
				     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
		if (!in)
			return fail(last_errno_error("Failed to open " + src.source.display));
		struct stat before = {};
		if (::fstat(in.get(), &before) < 0)
			return fail(last_errno_error("Failed to stat " + src.source.display));
		if (!S_ISREG(before.st_mode) || before.st_ino != src.source.st.st_ino || before.st_dev != src.source.st.st_dev ||
		    static_cast<std::uint64_t>(before.st_size) != e.size || mtime_ns(before) != e.mtime_ns)
			return fail(errno_error(ESTALE, "Failed to copy " + src.source.display + ", it changed during setup"));
		(void)::unlinkat(dirfd, name.c_str(), 0);  // a torn first attempt
		UniqueFd out(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
		if (!out)
			return fail(last_errno_error("Failed to create " + dest_display));
		// Planned size plus one byte at most: more is "modified while being copied", never a full /run.
		auto n = fs::copy_fd(in.get(), out.get(), e.size, src.source.display + " to " + dest_display, e.size + 1);
		if (!n)
			return fail(n.error());
		struct stat after = {};
		if (::fstat(in.get(), &after) < 0)
			return fail(last_errno_error("Failed to stat " + src.source.display));
		if (*n != e.size || !same_content_stamp(before, after)) {
			if (attempt == 0)
				continue;
			return fail(errno_error(ESTALE, "Failed to copy " + src.source.display +
								", it was modified while being copied (twice)"));
		}
		const struct timespec times[2] = {src.source.st.st_atim, src.source.st.st_mtim};
		if (::fchmod(out.get(), e.mode) < 0 || ::futimens(out.get(), times) < 0)
			return fail(last_errno_error("Failed to set attributes of " + dest_display));
		return *n;
	}
}

}  // namespace

Result<UniqueFd> mkdirs_at(int base, const std::string &rel, std::map<std::string, UniqueFd> &cache, const std::string &display)
{
	if (auto it = cache.find(rel); it != cache.end())
		return UniqueFd(::fcntl(it->second.get(), F_DUPFD_CLOEXEC, 3));
	int parent = base;
	UniqueFd holder;
	std::string sofar;
	for (const auto &c : fs::split_path(rel)) {
		sofar = fs::join(sofar, c);
		if (auto it = cache.find(sofar); it != cache.end()) {
			parent = it->second.get();
			continue;
		}
		if (::mkdirat(parent, c.c_str(), 0755) < 0 && errno != EEXIST)
			return fail(last_errno_error("Failed to create directory " + fs::join(display, sofar)));
		int fd = ::openat(parent, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(last_errno_error("Failed to open directory " + fs::join(display, sofar)));
		auto [it, _] = cache.emplace(sofar, UniqueFd(fd));
		parent = it->second.get();
	}
	return UniqueFd(::fcntl(parent, F_DUPFD_CLOEXEC, 3));
}

Result<CopiesDone> run_copies(std::vector<CopyJob> &jobs)
{
	std::stable_sort(jobs.begin(), jobs.end(), [](const CopyJob &a, const CopyJob &b) { return a.entry->size > b.entry->size; });
	std::atomic<std::size_t> next{0};
	std::atomic<bool> failed{false};
	std::atomic<std::uint64_t> bytes{0};
	std::mutex error_mutex;
	std::optional<std::pair<std::size_t, Error>> first_error;  // by job order, so the report is stable
	auto worker = [&] {
		for (std::size_t i; !failed && (i = next++) < jobs.size();) {
			const CopyJob &j = jobs[i];
			auto n = copy_source(*j.src, *j.entry, j.dirfd, j.name, j.dest_display);
			if (n) {
				bytes += *n;
				continue;
			}
			failed = true;
			std::lock_guard<std::mutex> lock(error_mutex);
			if (!first_error || i < first_error->first)
				first_error.emplace(i, n.error());
		}
	};
	const std::size_t threads = copy_threads_for(jobs.size());
	std::vector<std::thread> pool;
	for (std::size_t t = 1; t < threads; t++)
		pool.emplace_back(worker);
	worker();
	for (auto &t : pool)
		t.join();
	if (first_error)
		return fail(first_error->second);
	return CopiesDone{bytes.load(), threads};
}

}  // namespace root_build

}  // namespace unbounded
