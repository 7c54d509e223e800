#include "last_run.hpp"

#include "bounded_parse.hpp"
#include "state_format.hpp"

#include <nlohmann/json.hpp>

namespace unbounded {

std::optional<LastRun> parse_last_run(std::string_view text, const std::string &display)
{
	if (!check_json_bounded(text, display, ParseLimits{8, 100000}))
		return std::nullopt;
	auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
	if (j.is_discarded() || !j.is_object())
		return std::nullopt;
	if (j.contains("format") && j["format"].is_number_integer() && newer_state_format(j["format"].get<long long>(), display))
		return std::nullopt;
	auto str = [&](const char *key) { return j.contains(key) && j[key].is_string() ? printable(j[key].get<std::string>()) : std::string(); };
	LastRun last{str("command"), str("outcome"), {}};
	if (j.contains("warnings") && j["warnings"].is_array())
		for (const auto &w : j["warnings"]) {
			if (!w.is_string() || last.warnings.size() == MAX_LAST_RUN_WARNINGS)
				continue;
			last.warnings.push_back(printable(w.get<std::string>()));
		}
	return last;
}

}  // namespace unbounded
