// The discovery memo (/run/unbounded-nvidia/discovery-cache.json), ours but read as untrusted:
// every entry is validated as a fresh read is. Contract: a rejection is one printable line; a memo
// over the cap (4 MiB) is rejected so and nothing of it believed; an ELF entry believed has a known
// machine and a valid SONAME; a listing believed holds plain names; what was believed round-trips:
// saved and loaded again it gives the same listings and ELF facts, and saved again the same bytes.
#define FUZZ_NAME "discovery_memo"
#include "fuzz_target.hpp"

#include "discovery_cache.hpp"
#include "elf.hpp"
#include "unique_fd.hpp"

#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

using namespace unbounded;

namespace {

constexpr std::size_t MAX_MEMO_BYTES = 4u << 20;  // DiscoveryCache::load's read (discovery_cache.cpp)
constexpr const char *DISPLAY = "/run/unbounded-nvidia/discovery-cache.json";

struct Dir {
	std::string path;
	int fd;
};

const Dir &dir_named(const char *name)
{
	static std::map<std::string, Dir> dirs;
	auto [it, made] = dirs.try_emplace(name);
	if (made) {
		it->second.path = fuzz::scratch() + "/" + name;
		fuzz::reset_dir(it->second.path);
		it->second.fd = ::open(it->second.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (it->second.fd < 0)
			fuzz::violated(FUZZ_NAME, "open", it->second.path);
	}
	return it->second;
}

std::string slurp(const std::string &path)
{
	std::ifstream in(path, std::ios::binary);
	return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool same(const elf::Info &a, const elf::Info &b)
{
	return a.machine == b.machine && a.is_64bit == b.is_64bit && a.soname == b.soname && a.needed == b.needed;
}

}  // namespace

FUZZ_TARGET
{
	const Dir &run = dir_named("run"), &again_dir = dir_named("run-again");
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		fuzz::write_file(run.path + "/" + DiscoveryCache::FILE_NAME, fuzz::over_cap(text, MAX_MEMO_BYTES, ' '));
		std::string rejected;
		auto c = DiscoveryCache::load(run.fd, DISPLAY, &rejected);
		FUZZ_REQUIRE(rejected.find("larger than") != std::string::npos, rejected.empty() ? "believed" : rejected);
		FUZZ_REQUIRE_LINE(rejected);
	}
	fuzz::write_file(run.path + "/" + DiscoveryCache::FILE_NAME, text);
	std::string rejected;
	auto c = DiscoveryCache::load(run.fd, DISPLAY, &rejected);
	if (!rejected.empty()) {
		FUZZ_REQUIRE_LINE(rejected);
		return 0;
	}
	auto j = nlohmann::json::parse(text, nullptr, false);
	if (j.is_discarded() || !j.is_object())
		return 0;
	std::map<std::string, elf::Info> elfs;
	std::map<std::string, std::vector<std::string>> listings;
	if (j.contains("elf") && j["elf"].is_object())
		for (const auto &[key, _] : j["elf"].items())
			if (auto e = c.elf(key)) {
				FUZZ_REQUIRE(!elf::multiarch_for(e->machine, e->is_64bit).empty(), key);
				FUZZ_REQUIRE(!e->soname || elf::valid_soname(*e->soname), *e->soname);
				elfs.emplace(key, *e);
			}
	if (j.contains("listings") && j["listings"].is_object())
		for (const auto &[key, _] : j["listings"].items())
			if (auto l = c.listing(key)) {
				for (const auto &n : *l)
					FUZZ_REQUIRE(!n.empty() && n.find('/') == std::string::npos && n != "." && n != "..", n);
				listings.emplace(key, *l);
			}
	if (elfs.empty() && listings.empty())
		return 0;

	// Saved (an entry put back makes the memo dirty: save writes only a changed one) and loaded again.
	if (!elfs.empty())
		c.put_elf(elfs.begin()->first, elfs.begin()->second);
	else
		c.put_listing(listings.begin()->first, listings.begin()->second);
	auto saved = c.save(again_dir.fd, DISPLAY);
	FUZZ_REQUIRE(saved.has_value(), saved ? std::string() : saved.error().message);
	const std::string once = slurp(again_dir.path + "/" + DiscoveryCache::FILE_NAME);
	std::string rejected_again;
	auto again = DiscoveryCache::load(again_dir.fd, DISPLAY, &rejected_again);
	FUZZ_REQUIRE(rejected_again.empty(), rejected_again + " | " + once);
	for (const auto &[key, e] : elfs) {
		auto e2 = again.elf(key);
		FUZZ_REQUIRE(e2 && same(*e2, e), key + " | " + once);
	}
	for (const auto &[key, l] : listings) {
		auto l2 = again.listing(key);
		FUZZ_REQUIRE(l2 && *l2 == l, key + " | " + once);
	}
	// Every entry looked up: saved again only when dirtied, then to the same bytes.
	if (!elfs.empty())
		again.put_elf(elfs.begin()->first, elfs.begin()->second);
	else
		again.put_listing(listings.begin()->first, listings.begin()->second);
	auto saved_again = again.save(again_dir.fd, DISPLAY);
	FUZZ_REQUIRE(saved_again.has_value(), saved_again ? std::string() : saved_again.error().message);
	const std::string twice = slurp(again_dir.path + "/" + DiscoveryCache::FILE_NAME);
	FUZZ_REQUIRE(twice == once, once + " | " + twice);
	return 0;
}
