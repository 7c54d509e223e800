#include "graphics_config.hpp"

#include "bounded_parse.hpp"
#include "elf.hpp"
#include "fs.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace unbounded::graphics_config {
namespace {

// The first key that an object of `text` repeats, compared as the loaders compare them: glvnd and
// the Vulkan loader read these files with cJSON, whose cJSON_GetObjectItem() matches a key without
// regard to ASCII case and returns the first match, while nlohmann keeps the last. A file with two
// "library_path" (or "ICD" and "icd") would be judged by one value and loaded by the other: such a
// file is refused rather than judged either way (NVIDIA's never repeat a key). Keys are compared
// unescaped ("library_pat\u0068" is "library_path" to both parsers). "" when none; the one parse
// also fills `parsed`.
std::string repeated_key(std::string_view text, nlohmann::json &parsed)
{
	std::vector<std::set<std::string>> objects;  // each open object's folded keys
	std::string repeated;
	using Event = nlohmann::json::parse_event_t;
	parsed = nlohmann::json::parse(
		text,
		[&](int, Event event, nlohmann::json &item) {
			if (event == Event::object_start)
				objects.emplace_back();
			else if (event == Event::object_end)
				objects.pop_back();
			else if (event == Event::key && repeated.empty()) {
				const auto &k = item.get_ref<const std::string &>();
				std::string folded = k;
				for (char &c : folded)
					if (c >= 'A' && c <= 'Z')
						c = static_cast<char>(c - 'A' + 'a');
				if (!objects.back().insert(std::move(folded)).second)
					repeated = k;
			}
			return true;
		},
		/*allow_exceptions=*/false);
	return repeated;
}

}  // namespace

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
		nlohmann::json j;
		if (const std::string repeated = repeated_key(text, j); !repeated.empty()) {
			why = display + " repeats the key \"" + printable(repeated) +
			      "\" in one object: loaders take the first, so it is not judged by either";
			return {};
		}
		// Each kind by the one key its loader reads. A layer file with "layers" (a list the Vulkan
		// loader reads instead of "layer") would load what this check never saw.
		const char *top = kind.content == Content::Layer ? "layer" : "ICD";
		if (j.is_object() && j.contains(top) && j[top].is_object() && j[top].contains("library_path") &&
		    j[top]["library_path"].is_string())
			library = j[top]["library_path"].get<std::string>();
		if (kind.content == Content::Layer && j.is_object() && j.contains("layers")) {
			why = display + " has a \"layers\" list, which the Vulkan loader reads instead of its \"layer\"";
			return {};
		}
		if (j.is_discarded() || library.empty()) {
			why = display + (kind.content == Content::Layer ? " is not a layer file (no layer.library_path)" : " is not an ICD file (no ICD.library_path)");
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

std::string unloadable(std::string_view library, const std::string &libdir, const std::function<bool(std::string_view)> &in_root)
{
	const std::string name = fs::basename(std::string(library));
	const std::string shown = printable(library);
	if (library.find('/') != std::string_view::npos) {
		// An absolute path is opened as it is: the spec mounts the driver's libraries at libdir,
		// whatever the image and hook (the /usr/lib64 binds exist only without update-ldcache). A
		// relative one the Vulkan loader takes from the file's directory, glvnd from the process's.
		if (library.front() != '/')
			return "it names " + shown + ", a relative path no loader resolves to the driver's libraries in a pod";
		if (library != libdir + "/" + name)
			return "it names " + shown + ", where the CDI spec mounts nothing in a pod (the driver's libraries are in " + libdir + "/)";
	}
	if (!in_root(name))
		return "it names " + shown + ", which the driver root does not hold (no " + name + " in the staging mounts)";
	return {};
}

}  // namespace unbounded::graphics_config
