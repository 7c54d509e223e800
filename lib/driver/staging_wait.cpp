#include "staging_wait.hpp"

#include "mounts.hpp"
#include "nvidia_machine.hpp"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace unbounded {

StagingState probe_staging(const Context &ctx, const std::vector<WalkedTree> *walked)
{
	StagingState s;
	const std::string parent = ctx.real(ctx.config.staging);
	const std::string canonical_parent = MountTable::canonical(parent);
	if (auto m = MountTable::load(canonical_parent))
		s.mounts_table = std::make_shared<MountTable>(std::move(*m));
	const MountTable *mounts = s.mounts_table.get();
	// One staging directory, open at tree_fd (-1 when it did not open): usable when a mount or not empty.
	auto add_tree = [&](const std::string &name, int tree_fd) {
		const std::string display = fs::join(ctx.config.staging, name);
		const bool is_mount = mounts && mounts->mount_at(fs::join(canonical_parent, name)).has_value();
		bool non_empty = false;
		if (tree_fd >= 0)
			if (auto empty = fs::dir_is_empty(tree_fd, display))
				non_empty = !*empty;
		if (is_mount)
			s.mounts.push_back(display);
		if (is_mount || non_empty)
			s.usable.push_back(display);
	};

	if (walked && !walked->empty()) {
		s.nvidia_machine = true;
		for (const auto &t : *walked)
			add_tree(t.name, t.dirs.at("").fd);
		// In the order of the listing below (by name), as setup reports them.
		std::sort(s.usable.begin(), s.usable.end());
		std::sort(s.mounts.begin(), s.mounts.end());
	} else if (auto pfd = fs::open_dir(parent)) {
		if (auto names = fs::list_dir(pfd->get(), ctx.config.staging)) {
			for (const auto &n : *names) {
				if (!is_staging_entry(n))
					continue;
				s.nvidia_machine = true;
				struct stat st = {};
				if (::fstatat(pfd->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
					continue;
				auto sub = fs::open_dir_at(pfd->get(), n, fs::join(ctx.config.staging, n));
				add_tree(n, sub ? sub->get() : -1);
			}
		}
	}
	struct stat st = {};
	if (::lstat(ctx.real("/dev/nvidiactl").c_str(), &st) == 0) {
		s.nvidia_machine = true;
		s.control_node = S_ISCHR(st.st_mode);
	}
	return s;
}

Result<StagingState> wait_for_staging(const Context &ctx, Millis timeout, Millis *waited)
{
	using clock = std::chrono::steady_clock;
	const auto start = clock::now();
	for (;;) {
		StagingState s = probe_staging(ctx);
		auto elapsed = std::chrono::duration_cast<Millis>(clock::now() - start);
		if (waited)
			*waited = elapsed;
		if (!s.nvidia_machine || s.ready())
			return s;
		if (elapsed >= timeout) {
			std::string what;
			if (s.usable.empty())
				what = "the staging mounts under " + ctx.config.staging + " (no mount point or non-empty directory)";
			if (!s.control_node)
				what += std::string(what.empty() ? "" : " and ") + "/dev/nvidiactl (" +
					(s.nvidia_machine && ::access(ctx.real("/dev/nvidiactl").c_str(), F_OK) == 0
						 ? "not a character device"
						 : "missing") +
					")";
			return fail(make_error("Timed out after " + format_duration(timeout) + " waiting for " + what,
					       EXIT_NOT_READY, ETIMEDOUT));
		}
		std::this_thread::sleep_for(std::min(Millis(100), timeout - elapsed));
	}
}

}  // namespace unbounded
