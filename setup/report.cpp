#include "report.hpp"

#include "state_format.hpp"

#include "build_config.h"
#include "log.hpp"

#include <cmath>

namespace unbounded {

std::string Report::to_json() const
{
	nlohmann::ordered_json j;
	j["version"] = PROJECT_VERSION;
	j["format"] = STATE_FORMAT;  // status.json is this object (state_format.hpp)
	j["command"] = command;
	j["ready"] = ready();
	j["outcome"] = outcome;
	for (const auto &[k, v] : details.items())
		j[k] = v;
	auto put = [&](const char *key, const auto &value) {
		if (value)
			j[key] = *value;
	};
	put("driver_version", facts.driver_version);
	put("kernel_module_version", facts.kernel_module_version);
	put("staged_driver_version", facts.staged_driver_version);
	put("files_copied", facts.files_copied);
	put("files_reused", facts.files_reused);
	put("bytes_copied", facts.bytes_copied);
	put("bytes_reused", facts.bytes_reused);
	put("driver_root_ram_bytes", facts.driver_root_ram_bytes);
	put("gpus", facts.gpus);
	put("expected_gpus", facts.expected_gpus);
	put("cdi_devices", facts.cdi_devices);
	put("driver_root_generation", facts.driver_root_generation);
	if (!facts.consumer_findings.empty()) {
		nlohmann::ordered_json counts = nlohmann::ordered_json::object();
		for (const auto &[check, n] : facts.consumer_findings)
			counts[check] = n;
		j["consumer_findings"] = counts;
	}
	nlohmann::ordered_json t = nlohmann::ordered_json::object();
	for (const auto &[k, v] : timings_ms.items())
		t[k] = std::round(v.get<double>() * 1000.0) / 1000.0;
	j["timings_ms"] = t;
	// Paths as the machine sees them, under --root too (log::machine_view()).
	auto said = [](const std::vector<std::string> &v) {
		nlohmann::ordered_json a = nlohmann::ordered_json::array();
		for (const auto &s : v)
			a.push_back(log::machine_view(s));
		return a;
	};
	j["warnings"] = said(warnings);
	j["notes"] = said(notes);
	nlohmann::ordered_json p = nlohmann::ordered_json::array();
	for (const auto &pr : problems)
		p.push_back({{"path", log::machine_view(pr.path)}, {"message", log::machine_view(pr.message)}});
	j["problems"] = p;
	if (!error.empty())
		j["error"] = log::machine_view(error);
	// Names from staging and specs may be any bytes: invalid UTF-8 becomes U+FFFD instead of an
	// exception (messages are passed through printable() where they are made).
	return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace unbounded
