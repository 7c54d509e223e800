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

#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace unbounded {

struct StagingStamp {
	std::string identity;         // device, inode and times of every watched directory, in order
	struct timespec newest = {};  // the latest change time among them
	bool operator==(const StagingStamp &o) const { return identity == o.identity; }
};

// The watched directories: the staging parent, each tree in it, and the directories discovery reads
// in each. A stamp is taken by walking them afresh (never through a symlink), one tree at a time, each
// directory opened once and the tree's closed when it is done: a host with a thousand staging entries
// must not cost a thousand open fds (1,024 is the usual soft limit). A directory replaced or created
// meanwhile changes its own identity or its parent's times, and every parent is watched too.
class StagingWatch {
public:
	static StagingWatch open(const Context &ctx);
	StagingStamp stamp() const;

private:
	std::string real_parent_;
	std::string display_parent_;
};

struct QuietWait {
	Millis waited{};
	bool gave_up = false;  // still changing when the limit ran out
	StagingWatch watch;    // what was stamped
	StagingStamp stamp;    // as it was when the wait ended
};

QuietWait wait_for_quiet_staging(const Context &ctx, Millis settle, Millis limit);

}  // namespace unbounded
