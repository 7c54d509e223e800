#include "discovery_cache.hpp"

#include "bounded_parse.hpp"
#include "driver_discovery.hpp"
#include "format.hpp"
#include "fs.hpp"

#include <algorithm>

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

DiscoveryCache DiscoveryCache::load(int run_dir_fd, const std::string &display, std::string *rejected)
{
	DiscoveryCache c;
	auto reject = [&](const std::string &why) {
		*rejected = why;
		return DiscoveryCache{};
	};
	// run_dir_fd comes from open_private_dir, which checked the directory.
	auto read = fs::read_trusted_at(run_dir_fd, "", FILE_NAME, display, 4u << 20);
	if (!read)
		return read.error().step == fs::TrustedStep::Open && read.error().error.errnum == ENOENT ? c
													 : reject(read.error().error.message);
	const std::string &text = read->text;
	if (auto r = check_json_bounded(text, display, ParseLimits{8, 200000}); !r)
		return reject(r.error().message);
	auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
	if (j.is_discarded() || !j.is_object() || j.value("format", 0) != FORMAT)
		return reject(display + " has an unknown format");
	try {
		for (const auto &[key, names] : j.at("listings").items()) {
			auto list = names.get<std::vector<std::string>>();
			// What a fresh listing keeps (list_dir's filter), nothing else.
			if (std::all_of(list.begin(), list.end(),
					[](const std::string &n) { return is_plain_file_name(n) && could_be_driver_file(n); }))
				c.listings_[key] = std::move(list);
		}
		for (const auto &[key, e] : j.at("elf").items()) {
			elf::Info info;
			info.machine = e.at("machine").get<std::uint16_t>();
			info.is_64bit = e.at("is_64bit").get<bool>();
			if (e.contains("soname"))
				info.soname = e.at("soname").get<std::string>();
			if (!e.contains("needed"))
				continue;
			info.needed = e.at("needed").get<std::vector<std::string>>();
			const bool needed_ok = info.needed.size() <= 256 && std::all_of(info.needed.begin(), info.needed.end(), [](const std::string &n) {
						       return elf::valid_soname(n) && elf::is_driver_library_name(n);
					       });
			if (elf::multiarch_for(info.machine, info.is_64bit).empty() || (info.soname && !elf::valid_soname(*info.soname)) || !needed_ok)
				continue;  // not what read_info() could have returned: read the file again
			c.elfs_[key] = std::move(info);
		}
	} catch (const std::exception &) {
		return reject(display + " is damaged");
	}
	return c;
}

Result<void> DiscoveryCache::save(int run_dir_fd, const std::string &display) const
{
	if (!dirty_ && used_.size() == listings_.size() + elfs_.size())
		return {};
	nlohmann::json j;
	j["format"] = FORMAT;
	j["listings"] = nlohmann::json::object();
	for (const auto &[key, names] : listings_)
		if (used_.count(key))
			j["listings"][key] = names;
	j["elf"] = nlohmann::json::object();
	for (const auto &[key, info] : elfs_) {
		if (!used_.count(key))
			continue;
		nlohmann::json e{{"machine", info.machine}, {"is_64bit", info.is_64bit}, {"needed", info.needed}};
		if (info.soname)
			e["soname"] = *info.soname;
		j["elf"][key] = std::move(e);
	}
	auto w = fs::write_file_atomic_at(run_dir_fd, FILE_NAME, display,
					  j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
					  {.mode = 0644, .fsync = false, .skip_if_unchanged = false});
	if (!w)
		return fail(w.error());
	return {};
}

const std::vector<std::string> *DiscoveryCache::listing(const std::string &key) const
{
	auto it = listings_.find(key);
	hits_ += it != listings_.end();
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
	hits_ += it != elfs_.end();
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
