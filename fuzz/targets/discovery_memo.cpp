// The discovery memo (/run/unbounded-nvidia/discovery-cache.json), ours but read as untrusted:
// every entry is validated as a fresh read is. Contract: a rejection is one printable line; an ELF
// entry believed has a known machine and a valid SONAME; a listing believed holds plain names.
#define FUZZ_NAME "discovery_memo"
#include "fuzz_target.hpp"

#include "discovery_cache.hpp"
#include "elf.hpp"
#include "unique_fd.hpp"

#include <fcntl.h>
#include <nlohmann/json.hpp>

using namespace unbounded;

FUZZ_TARGET
{
	static const std::string dir = [] {
		std::string d = fuzz::scratch() + "/run";
		fuzz::reset_dir(d);
		return d;
	}();
	static const int dir_fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
	fuzz::write_file(dir + "/" + DiscoveryCache::FILE_NAME, text);
	std::string rejected;
	auto c = DiscoveryCache::load(dir_fd, "/run/unbounded-nvidia/discovery-cache.json", &rejected);
	if (!rejected.empty()) {
		FUZZ_REQUIRE_LINE(rejected);
		return 0;
	}
	auto j = nlohmann::json::parse(text, nullptr, false);
	if (j.is_discarded() || !j.is_object())
		return 0;
	if (j.contains("elf") && j["elf"].is_object())
		for (const auto &[key, _] : j["elf"].items())
			if (auto e = c.elf(key)) {
				FUZZ_REQUIRE(!elf::multiarch_for(e->machine, e->is_64bit).empty(), key);
				FUZZ_REQUIRE(!e->soname || elf::valid_soname(*e->soname), *e->soname);
			}
	if (j.contains("listings") && j["listings"].is_object())
		for (const auto &[key, _] : j["listings"].items())
			if (auto l = c.listing(key))
				for (const auto &n : *l)
					FUZZ_REQUIRE(!n.empty() && n.find('/') == std::string::npos && n != "." && n != "..", n);
	return 0;
}
