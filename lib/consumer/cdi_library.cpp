#include "cdi_library.hpp"

#include "bounded_parse.hpp"
#include "cdi_model.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace unbounded {
namespace {

using json = nlohmann::ordered_json;

struct Refusal {
	std::string reason;
};

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

// A JSON text as go-yaml (the library decodes every spec as YAML, and JSON is YAML) then Go read it,
// built in one SAX pass within the node and depth limits, never a yaml-cpp token stream (which costs
// fifty times the text): numbers become the text Go stores in a string field, a key set twice
// refuses the document. `error` empty and `limit` false: a syntax error (the library refuses it too).
class GoJson : public nlohmann::json_sax<json> {
public:
	explicit GoJson(const ParseLimits &limits) : limits_(limits) {}
	json result;
	std::string error;
	bool limit = false;

	bool null() override { return add(nullptr); }
	bool boolean(bool b) override { return add(b ? "true" : "false"); }
	bool number_integer(number_integer_t v) override { return add(std::to_string(v)); }
	bool number_unsigned(number_unsigned_t v) override { return add(std::to_string(v)); }
	bool number_float(number_float_t, const string_t &text) override
	{
		auto v = go_yaml_plain_string(text);
		return add(v ? json(std::move(*v)) : json(nullptr));
	}
	bool string(string_t &v) override { return add(std::move(v)); }
	bool binary(binary_t &) override { return false; }
	bool start_object(std::size_t) override { return open(json::object()); }
	// A document that is not a mapping is no spec to Go's decoding, however long it is.
	bool not_a_spec() const { return stack_.empty() && nodes_ == 0; }
	bool key(string_t &k) override
	{
		if (stack_.back()->contains(k)) {
			error = "the key '" + printable(k) + "' twice";
			return false;
		}
		key_ = std::move(k);
		return true;
	}
	bool end_object() override { return close(); }
	bool start_array(std::size_t) override
	{
		if (not_a_spec()) {
			error = "a list, not a spec";
			return false;
		}
		return open(json::array());
	}
	bool end_array() override { return close(); }
	bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override { return false; }

private:
	json *place(json v)
	{
		if (++nodes_ > limits_.max_nodes) {
			error = "more than " + std::to_string(limits_.max_nodes) + " values", limit = true;
			return nullptr;
		}
		if (stack_.empty()) {
			result = std::move(v);
			return &result;
		}
		json &top = *stack_.back();
		if (top.is_array()) {
			top.push_back(std::move(v));
			return &top.back();
		}
		json &slot = top[key_];
		slot = std::move(v);
		return &slot;
	}
	bool add(json v) { return place(std::move(v)) != nullptr; }
	bool open(json v)
	{
		if (stack_.size() + 1 > limits_.max_depth) {
			error = "nested deeper than " + std::to_string(limits_.max_depth) + " levels", limit = true;
			return false;
		}
		json *slot = place(std::move(v));
		if (!slot)
			return false;
		stack_.push_back(slot);
		return true;
	}
	bool close()
	{
		stack_.pop_back();
		return true;
	}

	const ParseLimits &limits_;
	std::vector<json *> stack_;
	std::string key_;
	std::size_t nodes_ = 0;
};

// The text as a document, JSON first (what every spec writer we know writes), else YAML.
Result<json> parse_spec_document(std::string_view text, const std::string &path)
{
	const ParseLimits limits{32, 50000, YamlScalars::GoStrings};
	const std::size_t first = text.find_first_not_of(" \t\r\n");
	if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
		GoJson sax(limits);
		bool ok = false;
		try {
			ok = json::sax_parse(text, &sax);
		} catch (const std::exception &) {
			ok = false;
		}
		if (ok)
			return std::move(sax.result);
		if (sax.limit) {
			Error e = make_error("Failed to parse " + path + ": " + sax.error);
			e.errnum = PARSE_LIMIT_ERRNO;
			return fail(std::move(e));
		}
		if (!sax.error.empty())
			return fail(make_error("Failed to parse " + path + ": " + sax.error));
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

// A JSON object decoded into a Go struct with `fields`, strictly: every key must fold to one of them,
// and of several keys for one field the last in Go's order wins (sigs.k8s.io/yaml writes the
// document's keys sorted before Go decodes them). Returns the value per field; absent: not there.
std::map<std::string, const json *> decode_object(const json &obj, std::initializer_list<std::string_view> fields, std::string_view what)
{
	if (!obj.is_object())
		throw Refusal{std::string(what) + " is not a mapping"};
	std::vector<const std::string *> keys;
	for (const auto &[k, v] : obj.items())
		keys.push_back(&k);
	std::sort(keys.begin(), keys.end(), [](const std::string *a, const std::string *b) { return *a < *b; });
	std::map<std::string, const json *> out;
	for (const std::string *k : keys) {
		const std::string folded = fold(*k);
		auto f = std::find_if(fields.begin(), fields.end(), [&](std::string_view name) { return fold(name) == folded; });
		if (f == fields.end())
			throw Refusal{"unknown field '" + printable(*k) + "' in " + std::string(what)};
		out[std::string(*f)] = &obj.at(*k);
	}
	return out;
}

const json *field(const std::map<std::string, const json *> &m, const std::string &name)
{
	auto it = m.find(name);
	return it == m.end() || it->second->is_null() ? nullptr : it->second;
}

std::string string_field(const std::map<std::string, const json *> &m, const std::string &name, std::string_view what)
{
	const json *v = field(m, name);
	if (!v)
		return "";
	if (!v->is_string())
		throw Refusal{name + " of " + std::string(what) + " is not a string"};
	return v->get<std::string>();
}

std::size_t list_size(const std::map<std::string, const json *> &m, const std::string &name, std::string_view what)
{
	const json *v = field(m, name);
	if (!v)
		return 0;
	if (!v->is_array())
		throw Refusal{name + " of " + std::string(what) + " is not a list"};
	return v->size();
}

bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A spec as Go decodes it, before the library validates it: a null item of a list of pointers
// (deviceNodes, mounts, hooks) decodes to a nil pointer, which the library's checks then dereference.
// What the checks read of each item, not its text: a pod's spec may hold 10,000 mounts.
struct Node {
	bool path = false, host_path = false, valid_type = true, valid_permissions = true;
};
struct Mount {
	bool host_path = false, container_path = false, type = false;
};
struct Hook {
	bool valid_name = false, path = false, valid_env = true;
};
struct Edits {
	std::vector<std::string> env;
	std::vector<std::optional<Node>> nodes;
	std::vector<std::optional<Mount>> mounts;
	std::vector<std::optional<Hook>> hooks;
	bool rdt = false, gids = false;

	bool empty() const { return env.empty() && nodes.empty() && mounts.empty() && hooks.empty() && !rdt && !gids; }
};
struct Device {
	std::string name;
	bool annotations = false;
	Edits edits;
};

struct Crash {
	std::string reason;
};

std::vector<std::string> string_list(const json *v, std::string_view what)
{
	std::vector<std::string> out;
	if (!v)
		return out;
	if (!v->is_array())
		throw Refusal{std::string(what) + " is not a list"};
	for (const auto &e : *v) {
		if (!e.is_string() && !e.is_null())
			throw Refusal{"an item of " + std::string(what) + " is not a string"};
		out.push_back(e.is_null() ? "" : e.get<std::string>());
	}
	return out;
}

bool env_valid(const std::vector<std::string> &env)
{
	return std::none_of(env.begin(), env.end(), [](const std::string &e) { return e.find('=') == 0 || e.find('=') == std::string::npos; });
}

// Each item of the list at `name`, decoded by `one`, nullopt for a null item.
template <typename T, typename F>
std::vector<std::optional<T>> pointer_list(const std::map<std::string, const json *> &m, const std::string &name, std::string_view what, F one)
{
	std::vector<std::optional<T>> out;
	list_size(m, name, what);
	if (const json *list = field(m, name))
		for (const auto &item : *list)
			out.push_back(item.is_null() ? std::nullopt : std::optional<T>(one(item)));
	return out;
}

Edits decode_edits(const json &e, std::string_view what)
{
	Edits out;
	const auto m = decode_object(e, {"env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGids"}, what);
	out.env = string_list(field(m, "env"), "env");
	out.nodes = pointer_list<Node>(m, "deviceNodes", what, [](const json &n) {
		const auto d = decode_object(n, {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}, "a device node");
		const std::string type = string_field(d, "type", "a device node");
		return Node{!string_field(d, "path", "a device node").empty(), !string_field(d, "hostPath", "a device node").empty(),
			    type == "" || type == "b" || type == "c" || type == "u" || type == "p",
			    string_field(d, "permissions", "a device node").find_first_not_of("rwm") == std::string::npos};
	});
	out.mounts = pointer_list<Mount>(m, "mounts", what, [](const json &mt) {
		const auto d = decode_object(mt, {"hostPath", "containerPath", "options", "type"}, "a mount");
		return Mount{!string_field(d, "hostPath", "a mount").empty(), !string_field(d, "containerPath", "a mount").empty(),
			     !string_field(d, "type", "a mount").empty()};
	});
	out.hooks = pointer_list<Hook>(m, "hooks", what, [](const json &h) {
		const auto d = decode_object(h, {"hookName", "path", "args", "env", "timeout"}, "a hook");
		static constexpr std::string_view NAMES[] = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};
		const std::string name = string_field(d, "hookName", "a hook");
		return Hook{std::find(std::begin(NAMES), std::end(NAMES), name) != std::end(NAMES), !string_field(d, "path", "a hook").empty(),
			    env_valid(string_list(field(d, "env"), "env"))};
	});
	out.gids = list_size(m, "additionalGids", what) > 0;
	out.rdt = field(m, "intelRdt") != nullptr;
	return out;
}

// ContainerEdits.Validate, in its order: env, device nodes, hooks, mounts.
void validate_edits(const Edits &e)
{
	if (!env_valid(e.env))
		throw Refusal{"an environment variable without a name and '='"};
	for (const auto &n : e.nodes) {
		if (!n)
			throw Crash{"a null device node"};
		if (!n->path || !n->valid_type || !n->valid_permissions)
			throw Refusal{"a device node without a path, or of a type or with permissions the library does not know"};
	}
	for (const auto &h : e.hooks) {
		if (!h)
			throw Crash{"a null hook"};
		if (!h->valid_name || !h->path || !h->valid_env)
			throw Refusal{"a hook of a name the library does not know, without a path, or with a bad environment variable"};
	}
	for (const auto &m : e.mounts) {
		if (!m)
			throw Crash{"a null mount"};
		if (!m->host_path || !m->container_path)
			throw Refusal{"a mount without a hostPath or containerPath"};
	}
}

// The version string as the library compares it ("v0.5.0" is 0.5.0); "" when it knows no such one.
std::string known_version(std::string version, std::string_view max_version)
{
	if (version.starts_with("v"))
		version.erase(0, 1);
	return known_cdi_version(version) && compare_cdi_versions(version, max_version) <= 0 ? version : "";
}

// specs-go/version.go: the lowest cdiVersion the spec's fields need. Every check runs, and each
// walks the devices' edits and then the spec's in order until it finds what it looks for: the 0.5.0
// check reads device nodes' hostPath (unless a device name starting with a digit settled it first),
// the 0.4.0 check mounts' type; a null one reached on the way crashes the library.
// `letter_first`: releases before 1.0 take any name that does not start with a letter as needing
// 0.5.0 (pkg/cdi/version.go of 0.8), 1.0 only one that starts with a digit.
std::string_view version_needed(const Edits &spec_edits, const std::vector<Device> &devices, bool annotations, std::string_view cls,
				bool letter_first)
{
	std::vector<const Edits *> edits;
	for (const auto &d : devices)
		edits.push_back(&d.edits);
	edits.push_back(&spec_edits);
	bool rdt_or_gids = false, digit_name = false;
	for (const Edits *e : edits)
		rdt_or_gids |= e->rdt || e->gids;
	for (const auto &d : devices) {
		annotations |= d.annotations;
		digit_name |= !d.name.empty() && (letter_first ? !letter(d.name[0]) : d.name[0] >= '0' && d.name[0] <= '9');
	}
	auto first_set = [&](auto member, auto set, const char *what) {
		for (const Edits *e : edits)
			for (const auto &item : (*e).*member) {
				if (!item)
					throw Crash{std::string("a null ") + what};
				if (set(*item))
					return true;
			}
		return false;
	};
	const bool host_path = !digit_name && first_set(
						      &Edits::nodes, [](const Node &n) { return n.host_path; }, "device node");
	const bool mount_type = first_set(
		&Edits::mounts, [](const Mount &m) { return m.type; }, "mount");
	CdiVersionNeed needs;
	const std::pair<bool, CdiFeature> uses[] = {{rdt_or_gids, CdiFeature::AdditionalGids},
						    {annotations, CdiFeature::Annotations},
						    {cls.find('.') != std::string_view::npos, CdiFeature::DotInClass},
						    {digit_name, CdiFeature::DigitFirstName},
						    {host_path, CdiFeature::DeviceNodeHostPath},
						    {mount_type, CdiFeature::MountType}};
	for (const auto &[used, feature] : uses)
		if (used)
			needs.add(feature);
	return needs.version();
}

// pkg/cdi's newSpec and Spec.validate, in their order.
SpecFacts decode_spec(const json &doc, std::string_view max_version)
{
	SpecFacts f;
	const auto top = decode_object(doc, {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}, "the spec");
	f.cdi_version = string_field(top, "cdiVersion", "the spec");
	f.kind = string_field(top, "kind", "the spec");
	const Edits spec_edits = field(top, "containerEdits") ? decode_edits(*field(top, "containerEdits"), "the spec's containerEdits") : Edits{};
	const bool annotations = field(top, "annotations") && !field(top, "annotations")->empty();
	std::vector<Device> devices;
	list_size(top, "devices", "the spec");
	if (const json *list = field(top, "devices"))
		for (const auto &d : *list) {
			Device out;  // a null device is Go's zero value: no name (refused when validated)
			if (d.is_null()) {
				devices.push_back(std::move(out));
				continue;
			}
			const auto dev = decode_object(d, {"name", "annotations", "containerEdits"}, "a device");
			out.name = string_field(dev, "name", "a device");
			out.annotations = field(dev, "annotations") && !field(dev, "annotations")->empty();
			if (const json *e = field(dev, "containerEdits"))
				out.edits = decode_edits(*e, "device " + printable(out.name));
			devices.push_back(std::move(out));
		}
	const std::string version = known_version(f.cdi_version, max_version.empty() ? CDI_NEWEST_VERSION : max_version);
	if (version.empty())
		throw Refusal{"cdiVersion '" + printable(f.cdi_version) + "' is not one this library release knows"};
	const std::size_t slash = f.kind.find('/');
	const bool qualified = slash != std::string::npos && slash > 0 && slash + 1 < f.kind.size();
	const std::string vendor = qualified ? f.kind.substr(0, slash) : "";
	const std::string cls = qualified ? f.kind.substr(slash + 1) : f.kind;
	const bool before_1_0 = !max_version.empty() && compare_cdi_versions(max_version, "1.0.0") < 0;
	const std::string_view needs = version_needed(spec_edits, devices, annotations, qualified ? std::string_view(cls) : std::string_view(), before_1_0);
	if (compare_cdi_versions(needs, version) > 0)
		throw Refusal{"cdiVersion " + version + " is below the " + std::string(needs) + " its fields need"};
	// validateVendorOrClassName slices name[1:len-1] once the first letter passed: a one-letter
	// vendor or class panics.
	for (const std::string *part : {&vendor, &cls}) {
		if (part->size() == 1 && letter((*part)[0]))
			throw Crash{"a one-letter vendor or class in kind '" + printable(f.kind) + "'"};
		if (!valid_cdi_name(*part, false))
			throw Refusal{"kind '" + printable(f.kind) + "' is not valid"};
	}
	validate_edits(spec_edits);
	for (const auto &d : devices) {
		if (!valid_cdi_name(d.name, true))
			throw Refusal{"device name '" + printable(d.name) + "' is not valid"};
		if (d.edits.empty())
			throw Refusal{"device '" + printable(d.name) + "' edits nothing"};
		validate_edits(d.edits);
		if (!f.devices.insert(d.name).second)
			throw Refusal{"device '" + printable(d.name) + "' twice"};
	}
	if (f.devices.empty())
		throw Refusal{"no devices"};
	return f;
}

}  // namespace

bool cdi_library_reads(std::string_view name)
{
	return name.ends_with(".json") || name.ends_with(".yaml");
}

LibraryVerdict judge_spec(std::string_view text, const std::string &path, std::string_view max_version)
{
	LibraryVerdict v;
	auto doc = parse_spec_document(text, path);
	if (!doc) {
		v.status = doc.error().errnum == PARSE_LIMIT_ERRNO ? LibraryVerdict::Status::Unjudged : LibraryVerdict::Status::Refused;
		v.reason = doc.error().message;
		return v;
	}
	if (doc->is_null()) {
		v.reason = "no spec in it";
		return v;
	}
	try {
		v.facts = decode_spec(*doc, max_version);
		v.status = LibraryVerdict::Status::Read;
		v.document = std::move(*doc);
	} catch (const Refusal &r) {
		v.reason = r.reason;
	} catch (const Crash &c) {
		v.status = LibraryVerdict::Status::Crashes;
		v.reason = c.reason;
	}
	return v;
}

}  // namespace unbounded
