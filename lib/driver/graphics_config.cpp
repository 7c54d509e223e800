#include "graphics_config.hpp"

#include "bounded_parse.hpp"
#include "elf.hpp"
#include "fs.hpp"

#include <nlohmann/json.hpp>

namespace unbounded::graphics_config {

std::string nvidia_library_of(const Kind &kind, std::string_view text, const std::string &display, std::string &why)
{
	std::string library;
	if (kind.content == Content::IcdList) {
		// The ICD loader reads the whole file as one library name (trailing whitespace trimmed).
		std::string_view t = text;
		while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\t' || t.back() == '\r'))
			t.remove_suffix(1);
		library = std::string(t);
	} else {
		if (auto r = check_json_bounded(text, display, ParseLimits{8, 1000}); !r) {
			why = r.error().message;
			return {};
		}
		auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
		for (const char *top : {"ICD", "layer"})
			if (j.is_object() && j.contains(top) && j[top].is_object() && j[top].contains("library_path") &&
			    j[top]["library_path"].is_string())
				library = j[top]["library_path"].get<std::string>();
		if (j.is_discarded() || library.empty()) {
			why = display + " is not an ICD or layer file (no ICD.library_path or layer.library_path)";
			return {};
		}
	}
	// NVIDIA's files name the library by SONAME; a path is judged by its file name.
	const std::string name = fs::basename(library);
	if (!elf::valid_soname(name) || !elf::is_driver_library_name(name)) {
		why = display + " names " + printable(library) + ", not an NVIDIA library";
		return {};
	}
	return library;
}

}  // namespace unbounded::graphics_config
