#include "bounded_parse.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace unbounded {
namespace {

using json = nlohmann::ordered_json;

// Length of the valid UTF-8 sequence at s[i] (1 for printable ASCII), 0 when it is not one or is a
// control character.
std::size_t utf8_length(std::string_view s, std::size_t i)
{
	const auto c = static_cast<unsigned char>(s[i]);
	if (c < 0x80)
		return c >= 0x20 && c != 0x7f ? 1 : 0;
	auto cont = [&](std::size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
		if (i + k >= s.size())
			return false;
		const auto b = static_cast<unsigned char>(s[i + k]);
		return b >= lo && b <= hi;
	};
	if (c >= 0xc2 && c <= 0xdf)
		return cont(1) ? 2 : 0;
	if (c == 0xe0)
		return cont(1, 0xa0) && cont(2) ? 3 : 0;
	if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
		return cont(1) && cont(2) ? 3 : 0;
	if (c == 0xed)
		return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
	if (c == 0xf0)
		return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
	if (c >= 0xf1 && c <= 0xf3)
		return cont(1) && cont(2) && cont(3) ? 4 : 0;
	if (c == 0xf4)
		return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
	return 0;
}

struct Abort {
	std::string message;
	int line;
	bool limit = false;  // refused by a limit, not by the syntax (PARSE_LIMIT_ERRNO)
};

// YAML takes an implicit key of at most 1024 characters, and yaml-cpp holds JSON to that, but it
// lets a longer block key through (a quoted one that runs on over lines). A key whose JSON form
// would be over the limit is refused: a spec that parses as YAML must parse as the JSON it is also
// written and read as. Bytes, with every control character as its 6-byte \u escape: an upper bound.
constexpr std::size_t MAX_KEY_JSON_BYTES = 1000;

std::size_t json_string_bytes(std::string_view s)
{
	std::size_t n = 2;  // the quotes
	for (unsigned char c : s)
		n += c < 0x20                  ? 6
		     : (c == '"' || c == '\\') ? 2
					       : 1;
	return n;
}

// Builds the JSON value from yaml-cpp's events, counting nodes and depth as it goes.
class JsonBuilder : public YAML::EventHandler {
public:
	explicit JsonBuilder(const ParseLimits &limits) : limits_(limits) {}
	json result;

	void OnDocumentStart(const YAML::Mark &) override {}
	void OnDocumentEnd() override {}
	void OnNull(const YAML::Mark &mark, YAML::anchor_t) override { add(mark, nullptr); }
	void OnAlias(const YAML::Mark &mark, YAML::anchor_t) override
	{
		throw Abort{"YAML aliases are not allowed here" + where(), mark.line, true};
	}
	void OnScalar(const YAML::Mark &mark, const std::string &tag, YAML::anchor_t, const std::string &value) override
	{
		refuse_tag(mark, tag);
		add(mark, scalar(tag, value));
	}
	void OnSequenceStart(const YAML::Mark &mark, const std::string &tag, YAML::anchor_t, YAML::EmitterStyle::value) override
	{
		refuse_tag(mark, tag);
		open(mark, json::array());
	}
	void OnSequenceEnd() override { stack_.pop_back(); }
	void OnMapStart(const YAML::Mark &mark, const std::string &tag, YAML::anchor_t, YAML::EmitterStyle::value) override
	{
		refuse_tag(mark, tag);
		open(mark, json::object());
	}
	void OnMapEnd() override { stack_.pop_back(); }

private:
	struct Frame {
		json *value;
		bool have_key = false;
		std::string key;
	};

	static json scalar(const std::string &tag, const std::string &s)
	{
		if (tag == "!")  // quoted: always a string
			return s;
		if (!s.empty() && s.size() < 19 && s != "-" &&
		    std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
			return std::stoll(s);
		if (s == "true" || s == "false")
			return s == "true";
		return s;
	}

	// An explicit tag ("!!binary", "!foo"; yaml-cpp gives "?" to a plain node and "!" to a quoted
	// scalar) where ParseLimits::read_tags says the reader's own rules for it are not ours.
	void refuse_tag(const YAML::Mark &mark, const std::string &tag) const
	{
		if (!limits_.read_tags && !tag.empty() && tag != "?" && tag != "!")
			throw Abort{"a YAML tag (" + printable(tag) + ")" + where(), mark.line, true};
	}

	// Where the parser is, as a key path ("licensing.legacy_files", "devices[3]"), for messages.
	std::string where() const
	{
		std::string p;
		for (const auto &f : stack_) {
			if (f.value->is_array())
				p += "[" + std::to_string(f.value->empty() ? 0 : f.value->size() - 1) + "]";
			else if (!f.key.empty())
				p += (p.empty() ? "" : ".") + printable(f.key);
		}
		return p.empty() ? std::string() : " under '" + p + "'";
	}

	// Places a value where the parser is: the document, the next list item, a mapping key or value.
	json *place(const YAML::Mark &mark, json v)
	{
		if (++nodes_ > limits_.max_nodes)
			throw Abort{"more than " + std::to_string(limits_.max_nodes) + " nodes" + where(), mark.line, true};
		if (stack_.empty()) {
			result = std::move(v);
			return &result;
		}
		Frame &f = stack_.back();
		if (f.value->is_array()) {
			f.value->push_back(std::move(v));
			return &f.value->back();
		}
		if (!f.have_key) {
			if (!v.is_string() && !v.is_number() && !v.is_boolean())
				throw Abort{"expected a plain key" + where(), mark.line};
			if (v.is_string() && json_string_bytes(v.get_ref<const std::string &>()) > MAX_KEY_JSON_BYTES)
				throw Abort{"a key longer than " + std::to_string(MAX_KEY_JSON_BYTES) + " bytes as JSON" + where(), mark.line, true};
			f.key = v.is_string() ? v.get<std::string>() : v.dump();
			f.have_key = true;
			return nullptr;
		}
		f.have_key = false;
		json &slot = (*f.value)[f.key];
		slot = std::move(v);
		return &slot;
	}

	void add(const YAML::Mark &mark, json v) { (void)place(mark, std::move(v)); }

	void open(const YAML::Mark &mark, json v)
	{
		if (stack_.size() + 1 > limits_.max_depth)
			throw Abort{"nested deeper than " + std::to_string(limits_.max_depth) + " levels" + where(), mark.line, true};
		json *slot = place(mark, std::move(v));
		if (!slot)
			throw Abort{"expected a plain key" + where(), mark.line};
		stack_.push_back(Frame{slot, false, {}});
	}

	const ParseLimits &limits_;
	std::vector<Frame> stack_;
	std::size_t nodes_ = 0;
};

// A JSON syntax error as an operator reads it: where (byte, line, column of the byte the parser
// stopped at) and what was expected there and found instead, in our words. nlohmann says where it
// was ("while parsing object key") and what its lexer made of the input ("invalid literal; last
// read: '...'"), text that names the library's states, not the file's content.
std::string json_syntax_error(std::string_view text, std::size_t position, std::string_view what)
{
	std::size_t at = position == 0 ? 0 : std::min(position - 1, text.size());  // 0-based, the byte read last
	auto has = [&](std::string_view s) { return what.find(s) != std::string_view::npos; };
	// A whole token the parser did not expect (a string where ':' belongs) was read to its end: said
	// at its first byte. A token the lexer refused ("invalid literal") is said where it stopped.
	if (at < text.size() && !has("invalid")) {
		auto token_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '+' || ch == '-'; };
		if (text[at] == '"' && at > 0) {
			for (std::size_t i = at; i-- > 0;) {
				std::size_t slashes = 0;
				while (slashes < i && text[i - 1 - slashes] == '\\')
					slashes++;
				if (text[i] == '"' && slashes % 2 == 0) {
					at = i;
					break;
				}
			}
		} else if (token_char(text[at])) {
			while (at > 0 && token_char(text[at - 1]))
				at--;
		}
	}
	std::size_t line = 1, line_start = 0;
	for (std::size_t i = 0; i < at; i++)
		if (text[i] == '\n') {
			line++;
			line_start = i + 1;
		}
	std::string expected = "valid JSON";
	if (has("; expected end of input"))  // not "unexpected end of input"
		expected = "the end of the file after the value";
	else if (has("while parsing object key"))
		expected = "a key in double quotes";
	else if (has("while parsing object separator"))
		expected = "':' after the key";
	else if (has("while parsing object"))
		expected = "',' or '}' after a member of the object";
	else if (has("while parsing array"))
		expected = "',' or ']' after an element of the array";
	else if (has("while parsing value"))
		expected = "a value (an object, array, string, number, true, false or null)";
	std::string found;
	if (at >= text.size() || has("unexpected end of input"))
		found = "the end of the file";
	else if (has("invalid string"))
		found = "a string with a control character, bad escape or invalid UTF-8";
	else if (has("invalid number"))
		found = "a malformed number";
	else
		found = "'" + printable(text.substr(at, 1)) + "'";
	return "byte " + std::to_string(at + 1) + ", line " + std::to_string(line) + ", column " + std::to_string(at - line_start + 1) +
	       ": expected " + expected + ", found " + found;
}

// The same limits for JSON, without building anything.
class JsonLimits : public nlohmann::json_sax<nlohmann::json> {
public:
	explicit JsonLimits(const ParseLimits &limits, std::string_view text) : limits_(limits), text_(text) {}
	std::string error;
	bool limit = false;  // refused by a limit, not by the syntax

	bool null() override { return node(); }
	bool boolean(bool) override { return node(); }
	bool number_integer(number_integer_t) override { return node(); }
	bool number_unsigned(number_unsigned_t) override { return node(); }
	bool number_float(number_float_t, const string_t &) override { return node(); }
	bool string(string_t &) override { return node(); }
	bool binary(binary_t &) override { return node(); }
	bool start_object(std::size_t) override { return open(); }
	bool key(string_t &) override { return true; }
	bool end_object() override { return close(); }
	bool start_array(std::size_t) override { return open(); }
	bool end_array() override { return close(); }
	bool parse_error(std::size_t position, const std::string &, const nlohmann::detail::exception &ex) override
	{
		error = "is not valid JSON (" + json_syntax_error(text_, position, ex.what()) + ")";
		return false;
	}

private:
	bool node()
	{
		if (++nodes_ > limits_.max_nodes) {
			error = "is refused: more than " + std::to_string(limits_.max_nodes) + " nodes";
			limit = true;
			return false;
		}
		return true;
	}
	bool open()
	{
		if (++depth_ > limits_.max_depth) {
			error = "is refused: nested deeper than " + std::to_string(limits_.max_depth) + " levels";
			limit = true;
			return false;
		}
		return node();
	}
	bool close()
	{
		depth_--;
		return true;
	}

	const ParseLimits &limits_;
	std::string_view text_;
	unsigned depth_ = 0;
	std::size_t nodes_ = 0;
};

}  // namespace

Result<nlohmann::ordered_json> parse_yaml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits)
{
	// yaml-cpp's messages quote the offending byte ("unknown escape character: \x04"): printable(),
	// so the error stays one line a log and status.json can carry.
	auto at = [&](int line, const std::string &what) {
		return fail(make_error("Failed to parse " + display + ":" + std::to_string(line + 1) + ": " + printable(what)));
	};
	try {
		std::istringstream in{std::string(text)};
		YAML::Parser parser(in);
		JsonBuilder builder(limits);
		if (!parser.HandleNextDocument(builder))
			return json(nullptr);  // an empty file
		JsonBuilder second(limits);
		if (parser.HandleNextDocument(second))
			return at(0, "more than one YAML document");
		return std::move(builder.result);
	} catch (const Abort &a) {
		auto e = at(a.line, a.message);
		if (a.limit)
			e.error().errnum = PARSE_LIMIT_ERRNO;
		return e;
	} catch (const YAML::Exception &e) {
		return at(e.mark.line, e.msg);
	} catch (const std::exception &e) {
		return fail(make_error("Failed to parse " + display + ": " + printable(e.what())));
	}
}

Result<void> check_json_bounded(std::string_view text, const std::string &display, const ParseLimits &limits)
{
	JsonLimits sax(limits, text);
	bool ok = false;
	try {
		ok = nlohmann::json::sax_parse(text, &sax);
	} catch (const std::exception &e) {  // the SAX parser reports syntax by parse_error: std::bad_alloc
		sax.error = "is not valid JSON (" + printable(e.what()) + ")";
	}
	if (!ok) {
		Error e = make_error(display + " " + (sax.error.empty() ? "is not valid JSON" : sax.error));
		if (sax.limit)
			e.errnum = PARSE_LIMIT_ERRNO;
		return fail(std::move(e));
	}
	return {};
}

std::string printable(std::string_view s)
{
	std::string out;
	out.reserve(s.size());
	for (std::size_t i = 0; i < s.size();) {
		if (std::size_t n = utf8_length(s, i)) {
			out.append(s.substr(i, n));
			i += n;
			continue;
		}
		static constexpr char hex[] = "0123456789abcdef";
		const auto c = static_cast<unsigned char>(s[i++]);
		out += "\\x";
		out += hex[c >> 4];
		out += hex[c & 15];
	}
	return out;
}

}  // namespace unbounded
