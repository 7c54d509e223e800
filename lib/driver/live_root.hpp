// The live driver root as one run reads it, once: the directory, its manifest's bytes and the trust
// checks of both, made as they are read. Setup's decision (refresh_policy's `live`), the space
// estimate for optional files, the install's reuse and unchanged test, and verify all take it from
// here instead of opening the manifest again (a second read could differ from the first).
#pragma once

#include "driver_root.hpp"
#include "manifest.hpp"
#include "unique_fd.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

class LiveRootRead {
public:
	RootLocation where;
	bool exists = false;                       // lstat() found something at the root's path
	UniqueFd fd;                               // the root directory (O_NOFOLLOW), when it opened
	std::optional<std::string> manifest_text;  // its manifest's bytes (a regular file, bounded), trusted or not
	std::vector<Problem> problems;             // why verify would not believe it (the first reason)

	// The manifest, parsed on first use (an unchanged re-run compares bytes and never needs it);
	// null when there is none or it does not parse.
	const Manifest *manifest() const;
	// verify's checks of what was read: the reading's problem, or the tree against the manifest.
	std::vector<Problem> check() const;

private:
	mutable std::optional<Result<Manifest>> parsed_;
};

LiveRootRead read_live_root(const RootLocation &root);

// The root this run has just swapped in from `plan`: the manifest in it is the one this run created
// (O_EXCL, in a tree it made), so it is not read back; the directory's trust and the tree are checked.
std::vector<Problem> check_built_root(const RootLocation &root, const Manifest &plan);

}  // namespace unbounded
