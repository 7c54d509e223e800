#include "manifest.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace unbounded {

using nlohmann::ordered_json;

std::string Manifest::to_json() const
{
	ordered_json j;
	j["format"] = 1;
	j["driver_version"] = driver_version;
	j["multiarch"] = multiarch;
	ordered_json arr = ordered_json::array();
	for (const auto &e : entries) {
		ordered_json o;
		o["path"] = e.path;
		if (e.type == ManifestEntry::Type::File) {
			o["type"] = "file";
			o["mode"] = format_mode(e.mode);
			o["size"] = e.size;
			o["mtime_ns"] = e.mtime_ns;
			o["source"] = e.source;
			o["source_id"] = e.source_id;
		} else {
			o["type"] = "link";
			o["target"] = e.target;
		}
		arr.push_back(std::move(o));
	}
	j["entries"] = std::move(arr);
	return j.dump(1) + "\n";
}

Result<Manifest> Manifest::from_json(const std::string &text, const std::string &display)
{
	// The reason may hold the manifest's own bytes (a path, a type, the JSON library's "last read"): made
	// printable, so the error stays one line of text whatever the file holds.
	auto bad = [&](const std::string &why) { return fail(make_error("Invalid manifest " + display + ": " + printable(why))); };
	ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
	if (j.is_discarded() || !j.is_object())
		return bad("not a JSON object");
	Manifest m;
	try {
		if (j.at("format").get<int>() != 1)
			return bad("unknown format");
		m.driver_version = j.at("driver_version").get<std::string>();
		m.multiarch = j.at("multiarch").get<std::string>();
		for (const auto &o : j.at("entries")) {
			ManifestEntry e;
			e.path = o.at("path").get<std::string>();
			const auto type = o.at("type").get<std::string>();
			if (type == "file") {
				e.type = ManifestEntry::Type::File;
				e.mode = static_cast<unsigned>(std::stoul(o.at("mode").get<std::string>(), nullptr, 8));
				e.size = o.at("size").get<std::uint64_t>();
				e.mtime_ns = o.at("mtime_ns").get<std::int64_t>();
				e.source = o.at("source").get<std::string>();
				e.source_id = o.at("source_id").get<std::string>();
			} else if (type == "link") {
				e.type = ManifestEntry::Type::Link;
				e.target = o.at("target").get<std::string>();
			} else {
				return bad("unknown entry type '" + type + "'");
			}
			if (e.path.empty() || e.path.front() == '/' || e.path.find("..") != std::string::npos)
				return bad("entry path '" + e.path + "' outside the root");
			m.entries.push_back(std::move(e));
		}
	} catch (const std::exception &ex) {
		return bad(ex.what());
	}
	if (!std::is_sorted(m.entries.begin(), m.entries.end(),
			    [](const auto &a, const auto &b) { return a.path < b.path; }))
		return bad("entries not sorted");
	return m;
}

const ManifestEntry *Manifest::find(const std::string &path) const
{
	auto it = std::lower_bound(entries.begin(), entries.end(), path,
				   [](const ManifestEntry &e, const std::string &p) { return e.path < p; });
	return it != entries.end() && it->path == path ? &*it : nullptr;
}

}  // namespace unbounded
