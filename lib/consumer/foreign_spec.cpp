#include "foreign_spec.hpp"

#include "bounded_parse.hpp"
#include "cdi_model.hpp"

#include <array>
#include <cstring>

namespace unbounded {
namespace {

using nlohmann::ordered_json;

// yaml-cpp's scanner takes memory by the nesting before any event reaches the bounded builder
// (500,000 '[' cost 140 MB): a file a pod wrote is not parsed when its flow nesting is deeper than
// the parsers allow or its block indentation (spaces, "- " and "? ") is wider than any spec.
// Brackets are counted wherever they stand, quoted, in comments or not: telling a quote that opens a
// scalar from an apostrophe inside one is the parser's work.
bool yaml_shape_bounded(std::string_view t)
{
	constexpr unsigned MAX_FLOW = 32;
	constexpr std::size_t MAX_INDENT = 256;
	unsigned flow = 0;
	bool line_start = true;
	std::size_t indent = 0;
	for (const char c : t) {
		if (c == '\n') {
			line_start = true, indent = 0;
			continue;
		}
		if (line_start) {
			if (c == ' ' || c == '-' || c == '?') {
				if (++indent > MAX_INDENT)
					return false;
				continue;
			}
			line_start = false;
		}
		if ((c == '[' || c == '{') && ++flow > MAX_FLOW)
			return false;
		if ((c == ']' || c == '}') && flow > 0)
			flow--;
	}
	return true;
}

// The text as a document (a list is not read: it is no spec): JSON first (what every spec writer we know writes, and a SAX pass is a
// fiftieth of yaml-cpp's cost), else YAML, both within the limits. An explicit YAML tag is past
// them: go-yaml reads `!!binary` as base64, so what the tag hides is not read here.
Result<ordered_json> read_document(std::string_view text, const std::string &path)
{
	ParseLimits limits{32, 50000};
	limits.read_tags = false;
	const std::size_t first = text.find_first_not_of(" \t\r\n");
	if (first != std::string_view::npos && text[first] == '[')
		return ordered_json::array();  // a list: no spec to Go's decoding, however long it is (not parsed)
	if (first != std::string_view::npos && text[first] == '{') {
		auto checked = check_json_bounded(text, path, limits);
		if (checked) {
			ordered_json doc = ordered_json::parse(text, nullptr, false);  // the same parser: it does not fail here
			if (!doc.is_discarded())
				return doc;
		} else if (checked.error().errnum == PARSE_LIMIT_ERRNO)
			return fail(checked.error());
		// Not JSON: YAML's flow style is wider (unquoted scalars, comments); yaml-cpp decides.
	}
	if (!yaml_shape_bounded(text)) {
		Error e = make_error("Failed to parse " + path + ": nested or indented deeper than verify parses a spec");
		e.errnum = PARSE_LIMIT_ERRNO;
		return fail(std::move(e));
	}
	return parse_yaml_bounded(text, path, limits);
}

// Go's encoding/json matches a key to a field by its case-folded form: ASCII letters, and the two
// runes whose fold set holds one (KELVIN SIGN with K, LATIN SMALL LETTER LONG S with S).
std::string fold(std::string_view s)
{
	std::string out;
	for (std::size_t i = 0; i < s.size(); i++) {
		const auto c = static_cast<unsigned char>(s[i]);
		if (c >= 'a' && c <= 'z') {
			out += static_cast<char>(c - 'a' + 'A');
		} else if (s.substr(i, 3) == "\xe2\x84\xaa") {  // U+212A
			out += 'K', i += 2;
		} else if (s.substr(i, 2) == "\xc5\xbf") {  // U+017F
			out += 'S', i += 1;
		} else {
			out += static_cast<char>(c);
		}
	}
	return out;
}

struct Stop {
	ForeignSpec::Verdict verdict;
	std::string reason;
};

// A null item of deviceNodes, mounts or hooks decodes to a nil pointer that the library's version
// and validity checks dereference; wherever it stands, it is taken as reached. go-yaml merges the
// mapping a merge key names into its own, which nothing here follows.
void walk(const ordered_json &v)
{
	static const std::array<std::pair<std::string_view, std::string_view>, 3> POINTER_LISTS = {
		{{"DEVICENODES", "device node"}, {"MOUNTS", "mount"}, {"HOOKS", "hook"}}};
	if (v.is_array())
		for (const auto &item : v)
			walk(item);
	if (!v.is_object())
		return;
	for (const auto &[key, value] : v.items()) {
		if (key == "<<")
			throw Stop{ForeignSpec::Verdict::Unreadable, "it holds a YAML merge key (<<)"};
		const std::string folded = fold(key);
		for (const auto &[name, what] : POINTER_LISTS)
			if (folded == name && value.is_array())
				for (const auto &item : value)
					if (item.is_null())
						throw Stop{ForeignSpec::Verdict::Crashes, "a null " + std::string(what)};
		walk(value);
	}
}

// go-yaml ends a line at a lone CR, NEL (U+0085), LS (U+2028) and PS (U+2029) as at LF; yaml-cpp
// and JSON do not, so a comment or scalar would hide from us the key the library reads after one.
// memchr() for each lead byte: a spec holds none of them, and a pod's 2 MiB file is read at
// memory speed (the scan's time budget is shared by every file of the directory).
bool foreign_line_break(std::string_view t)
{
	auto each = [&](char lead, auto &&match) {
		for (const char *p = t.data(), *end = t.data() + t.size(); (p = static_cast<const char *>(std::memchr(p, lead, end - p))); p++)
			if (match(std::string_view(p, end - p)))
				return true;
		return false;
	};
	return each('\r', [](std::string_view at) { return at.size() == 1 || at[1] != '\n'; }) ||
	       each('\xc2', [](std::string_view at) { return at.starts_with("\xc2\x85"); }) ||
	       each('\xe2', [](std::string_view at) { return at.starts_with("\xe2\x80\xa8") || at.starts_with("\xe2\x80\xa9"); });
}

}  // namespace

bool cdi_library_reads(std::string_view name) { return name.ends_with(".json") || name.ends_with(".yaml"); }

ForeignSpec judge_foreign_spec(std::string_view text, const std::string &path)
{
	ForeignSpec out;
	if (foreign_line_break(text)) {
		out.verdict = ForeignSpec::Verdict::Unreadable;
		out.reason = "it ends a line with a lone CR, NEL, LS or PS, where go-yaml and verify's parsers read lines differently";
		return out;
	}
	auto doc = read_document(text, path);
	if (!doc) {
		out.verdict = ForeignSpec::Verdict::Unreadable;
		out.reason = doc.error().message;
		return out;
	}
	if (!doc->is_object())
		return out;  // empty, a scalar or a list: no spec
	try {
		walk(*doc);
		for (const auto &[key, value] : doc->items()) {
			if (fold(key) != "KIND" || !value.is_string())
				continue;
			const auto &kind = value.get_ref<const std::string &>();
			if (cdi_kind_panics(kind))
				throw Stop{ForeignSpec::Verdict::Crashes, "a one-letter vendor or class in kind '" + printable(kind) + "'"};
			out.kinds.insert(kind);
		}
	} catch (const Stop &s) {
		out.verdict = s.verdict;
		out.reason = s.reason;
		out.kinds.clear();
		return out;
	}
	out.document = std::move(*doc);
	return out;
}

}  // namespace unbounded
