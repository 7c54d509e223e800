// The manifest: what a driver root contains, written into it as its last file. It is what `verify`
// checks a live root against, and what lets the next `setup` reuse files that did not change.
#pragma once

#include "error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace unbounded {

inline constexpr const char *MANIFEST_NAME = ".unbounded-manifest.json";
// A manifest lists tens of files; anything near this is not ours.
inline constexpr std::size_t MAX_MANIFEST_BYTES = 4u << 20;

struct ManifestEntry {
	enum class Type {
		File,
		Link,
	} type = Type::File;
	std::string path;  // relative to the driver root
	// files
	unsigned mode = 0644;
	std::uint64_t size = 0;
	std::int64_t mtime_ns = 0;  // copied from the source, so an unchanged source is recognisable
	std::string source;         // staging path it came from (display form)
	std::string source_id;      // "<dev>:<ino>:<ctime>" of the source, with size and mtime the reuse key
	// links
	std::string target;  // relative link target
};

struct Manifest {
	std::string driver_version;
	std::string multiarch;
	std::vector<ManifestEntry> entries;  // sorted by path

	std::string to_json() const;  // deterministic bytes
	static Result<Manifest> from_json(const std::string &text, const std::string &display);
	const ManifestEntry *find(const std::string &path) const;
};

}  // namespace unbounded
