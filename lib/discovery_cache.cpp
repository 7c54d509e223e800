#include "discovery_cache.hpp"

#include "fs.hpp"

#include <nlohmann/json.hpp>

namespace unbounded {

std::string identity_key(const struct stat &st)
{
	auto ns = [](const struct timespec &t) {
		return std::to_string(static_cast<long long>(t.tv_sec)) + "." + std::to_string(t.tv_nsec);
	};
	return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
	       std::to_string(static_cast<unsigned long long>(st.st_ino)) + ":" + std::to_string(st.st_size) + ":" +
	       ns(st.st_mtim) + ":" + ns(st.st_ctim);
}

DiscoveryCache DiscoveryCache::load(const std::string &real_path)
{
	DiscoveryCache c;
	auto text = fs::read_file(real_path, 4u << 20);
	if (!text)
		return c;
	auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
	if (j.is_discarded() || !j.is_object() || j.value("format", 0) != 1)
		return c;
	try {
		for (const auto &[key, names] : j.at("listings").items())
			c.listings_[key] = names.get<std::vector<std::string>>();
		for (const auto &[key, e] : j.at("elf").items()) {
			elf::Info info;
			info.machine = e.at("machine").get<std::uint16_t>();
			info.is_64bit = e.at("is_64bit").get<bool>();
			if (e.contains("soname"))
				info.soname = e.at("soname").get<std::string>();
			c.elfs_[key] = std::move(info);
		}
	} catch (const std::exception &) {
		return DiscoveryCache{};  // a damaged cache is no cache
	}
	return c;
}

Result<void> DiscoveryCache::save(const std::string &real_path) const
{
	if (!dirty_ && used_.size() == listings_.size() + elfs_.size())
		return {};
	nlohmann::json j;
	j["format"] = 1;
	j["listings"] = nlohmann::json::object();
	for (const auto &[key, names] : listings_)
		if (used_.count(key))
			j["listings"][key] = names;
	j["elf"] = nlohmann::json::object();
	for (const auto &[key, info] : elfs_) {
		if (!used_.count(key))
			continue;
		nlohmann::json e{{"machine", info.machine}, {"is_64bit", info.is_64bit}};
		if (info.soname)
			e["soname"] = *info.soname;
		j["elf"][key] = std::move(e);
	}
	if (auto r = fs::mkdir_p(fs::dirname(real_path), 0755); !r)
		return r;
	auto w = fs::write_file_atomic(real_path, j.dump() + "\n", {.mode = 0644, .fsync = false, .skip_if_unchanged = false});
	if (!w)
		return fail(w.error());
	return {};
}

const std::vector<std::string> *DiscoveryCache::listing(const std::string &key) const
{
	auto it = listings_.find(key);
	(it == listings_.end() ? misses_ : hits_)++;
	used_.insert(key);
	return it == listings_.end() ? nullptr : &it->second;
}

void DiscoveryCache::put_listing(const std::string &key, std::vector<std::string> names)
{
	listings_[key] = std::move(names);
	used_.insert(key);
	dirty_ = true;
}

std::optional<elf::Info> DiscoveryCache::elf(const std::string &key) const
{
	auto it = elfs_.find(key);
	(it == elfs_.end() ? misses_ : hits_)++;
	used_.insert(key);
	if (it == elfs_.end())
		return std::nullopt;
	return it->second;
}

void DiscoveryCache::put_elf(const std::string &key, const elf::Info &info)
{
	elfs_[key] = info;
	used_.insert(key);
	dirty_ = true;
}

}  // namespace unbounded
