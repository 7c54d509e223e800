// A CDI spec file as one run reads it, once: setup's replace check, its unchanged-bytes
// test, the removal of a side spec of ours, the spec checks and the consumer check all take its bytes
// from here. Each of them bounded its own read before; bounded() answers what that read would have.
#pragma once

#include "context.hpp"
#include "error.hpp"

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace unbounded {

// Ours may be larger than the cap on specs anyone else could write (6,000 IMEX channels are 2.1 MB);
// the consumer check read ours up to this much already.
inline constexpr std::size_t SPEC_READ_CAP = 16u << 20;

struct SpecRead {
	std::string path;                          // as configured: "/etc/cdi/nvidia.yaml"
	std::size_t cap = SPEC_READ_CAP;           // what it was read up to
	Result<std::string> text = fail(Error{});  // at most `cap` bytes, or why not (ENOENT: not there)
	dev_t dev = 0;                             // of the file read, to remove only that very file
	ino_t ino = 0;
	mode_t mode = 0;
	bool ours = false;  // a regular file that begins with our marker line, whatever its size

	bool absent() const { return !text && text.error().errnum == ENOENT; }
	// What fs::read_file_at(..., path, max_bytes) would have returned (max_bytes at most `cap`).
	Result<std::string> bounded(std::size_t max_bytes) const;

	// A file whose bytes this run has just written (nothing read).
	static SpecRead written(const std::string &path, const std::string &bytes);
};

// Opened without following a symlink or blocking, a regular file only (fs::open_regular_at). A spec
// only ever read up to MAX_SPEC_BYTES (the device plugin's) is read with that `cap`: a pod's huge
// file costs no more memory than before.
SpecRead read_spec(const Context &ctx, const std::string &path, std::size_t cap = SPEC_READ_CAP);

}  // namespace unbounded
