// Memo of the two expensive reads of driver discovery: the listing of a staging directory (a host's
// lib dir holds thousands of entries) and the ELF facts of a library (machine, DT_SONAME). Entries are
// keyed by the inode's identity and change time (dev, ino, size, mtime, ctime), which every change of
// a directory's entries or a file's content updates, so a hit is exactly what a fresh read would
// return. It lives in /run (one boot); a missing or unreadable cache only costs the reads again.
// It is believed only when nobody else could have written it (our file in our directory, see
// fs::check_trusted), and every entry is validated exactly as a fresh read is: a listing holds
// only names a fresh listing would keep, an ELF entry a known machine and a valid SONAME. Anything
// else is dropped and read again.
#pragma once

#include "elf.hpp"
#include "error.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace unbounded {

std::string identity_key(const struct stat &st);

class DiscoveryCache {
public:
	static constexpr const char *FILE_NAME = "discovery-cache.json";
	// 2: ELF entries carry the driver's DT_NEEDED names; 3: listings keep the graphics configuration
	// files' names. A memo of another format is read afresh.
	static constexpr int FORMAT = 4;  // 4: listings keep libnvidia-api.so.1
	// From the trusted run directory; `rejected` tells why a cache was not believed.
	static DiscoveryCache load(int run_dir_fd, const std::string &display, std::string *rejected);
	// Writes the cache back when something was added.
	Result<void> save(int run_dir_fd, const std::string &display) const;

	const std::vector<std::string> *listing(const std::string &key) const;
	void put_listing(const std::string &key, std::vector<std::string> names);
	std::optional<elf::Info> elf(const std::string &key) const;
	void put_elf(const std::string &key, const elf::Info &info);

	std::size_t hits() const { return hits_; }

private:
	std::map<std::string, std::vector<std::string>> listings_;
	std::map<std::string, elf::Info> elfs_;
	mutable std::set<std::string> used_;  // keys looked up or added by this run; only these are saved
	bool dirty_ = false;
	mutable std::size_t hits_ = 0;
};

}  // namespace unbounded
