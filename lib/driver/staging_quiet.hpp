// The refresh's settle wait. A host package upgrade replaces driver files over seconds (every
// package manager installs by creating and renaming entries); a refresh acts once the staging
// directories have been quiet for the settle time, so it reads the upgrade once, whole.
//
// Quiet is judged from the change times (ctime) of the staging parent, every staging tree and the
// directories discovery reads in it: the kernel sets ctime on every create, remove and rename, nobody
// can set it back, and host and machine share the clock. A refresh started long after the last
// change therefore waits not at all. The wait is bounded: after `limit` the refresh reads what is
// there, and discovery decides whether that is a consistent driver.
#pragma once

#include "config.hpp"
#include "context.hpp"
#include "staging.hpp"
#include "unique_fd.hpp"

#include <cstdint>
#include <ctime>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace unbounded {

// One watched directory as a stamp saw it. `slot` numbers the directories the walk looked for, in
// its order, so that one missing and another present never compare equal to the reverse.
struct DirIdentity {
	std::uint32_t slot = 0;
	dev_t dev = 0;
	ino_t ino = 0;
	off_t size = 0;
	struct timespec mtime = {};
	struct timespec ctime = {};
	static DirIdentity of(std::uint32_t slot, const struct stat &st);
	bool operator==(const DirIdentity &o) const;
};

struct StagingStamp {
	std::vector<DirIdentity> dirs;  // every watched directory found, in walk order
	struct timespec newest = {};    // the latest change time among them
	bool operator==(const StagingStamp &o) const { return dirs == o.dirs; }
};

// The watched directories: the staging parent, each tree in it, and the directories discovery reads
// in each. A stamp is taken by walking them afresh (never through a symlink), one tree at a time.
//
// Whether anything changed since a stamp is asked once per refresh pass, after the pass: the watch
// keeps the walk's directories open (O_PATH) and asks each for its times again, which costs a
// fraction of a walk. That sees every create, remove and rename in a watched directory (its own
// times) and every directory replaced (its parent's times); a mount or unmount, which changes no
// directory's times, shows on /proc/self/mountinfo (opened before the walk, it polls as changed
// once the mount table has), and then the watch walks afresh. A host with a thousand staging
// entries must not cost a thousand open fds (1,024 is the usual soft limit): past MAX_HELD
// directories none are kept and the question is answered by a walk.
class StagingWatch {
public:
	static constexpr std::size_t MAX_HELD = 128;

	static StagingWatch open(const Context &ctx);
	StagingStamp stamp();                               // walks, and keeps the directories for changed_since
	bool changed_since(const StagingStamp &was) const;  // after stamp(): was what it returned
	// What the last stamp() saw of each staging tree, its directories still open (Staging::from_walk);
	// empty when it held none (over MAX_HELD).
	const std::vector<WalkedTree> &trees() const { return trees_; }

private:
	StagingStamp walk(std::vector<UniqueFd> *keep, std::vector<WalkedTree> *trees) const;
	bool mounts_changed() const;

	std::string real_parent_;
	std::string display_parent_;
	UniqueFd mountinfo_;          // opened before the last walk
	std::vector<UniqueFd> held_;  // the last walk's directories, in its order; empty when over MAX_HELD
	std::vector<WalkedTree> trees_;
};

struct QuietWait {
	Millis waited{};
	bool gave_up = false;  // still changing when the limit ran out
	StagingWatch watch;    // what was stamped
	StagingStamp stamp;    // as it was when the wait ended
};

QuietWait wait_for_quiet_staging(const Context &ctx, Millis settle, Millis limit);

}  // namespace unbounded
