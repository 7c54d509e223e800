// What every binary says to --version: the release and the commit it was built from, so that an
// operator rolling a fleet forward or back can tell which build a node runs.
#pragma once

namespace unbounded {

// Prints "PROGRAM RELEASE (commit COMMIT)" on stdout: the release ("0.1.0") and the commit (`git
// describe` at build time, or meson's -Dcommit= for a tree without git history, as a source package
// is; else "unknown").
void print_version(const char *program);

}  // namespace unbounded
