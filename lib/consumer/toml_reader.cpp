#include "toml_reader.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace unbounded {
namespace {

// "'key'": built by appending, not "'" + printable(...): g++ 12 at -O3 on aarch64 (the arm64 tier's
// release build) warns -Wrestrict about the insert at 0 that operator+(const char *, string &&) inlines.
std::string quoted_key(const std::string &key)
{
	std::string q = "'";
	q.append(printable(key)).append("'");
	return q;
}

using json = nlohmann::json;

struct Failure {
	std::string what;
};

class TomlParser {
public:
	TomlParser(std::string_view text, const ParseLimits &limits) : s_(text), limits_(limits) {}

	json parse()
	{
		json root = json::object();
		json *table = &root;
		for (;;) {
			skip_blank_lines();
			if (eof())
				return root;
			if (peek() == '[') {
				const bool array = peek(1) == '[';
				pos_ += array ? 2 : 1;
				skip_ws();
				auto path = key_path();
				skip_ws();
				expect(array ? "]]" : "]", array ? "']]' closing the array of tables header" : "']' closing the table header");
				table = open_table(root, path, array);
			} else {
				auto path = key_path();
				skip_ws();
				expect("=", "'=' after the key");
				skip_ws();
				assign(*table, path, value(1));
			}
			end_of_statement();
		}
	}

	int line() const { return line_; }

private:
	bool eof() const { return pos_ >= s_.size(); }
	char peek(std::size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
	[[noreturn]] void error(const std::string &what) { throw Failure{what}; }

	void expect(std::string_view token, const char *what)
	{
		if (s_.substr(pos_, token.size()) != token)
			error(std::string("expected ") + what);
		pos_ += token.size();
	}

	void skip_ws()
	{
		while (!eof() && (peek() == ' ' || peek() == '\t'))
			pos_++;
	}

	void skip_comment()
	{
		if (peek() != '#')
			return;
		while (!eof() && peek() != '\n')
			pos_++;
	}

	bool newline()
	{
		if (peek() == '\r' && peek(1) == '\n')
			pos_++;
		if (peek() != '\n')
			return false;
		pos_++;
		line_++;
		return true;
	}

	// Whitespace, comments and new lines: between statements, and between an array's values.
	void skip_blank_lines()
	{
		for (;;) {
			skip_ws();
			skip_comment();
			if (!newline())
				return;
		}
	}

	void end_of_statement()
	{
		skip_ws();
		skip_comment();
		if (!eof() && !newline())
			error("expected the end of the line");
	}

	void count_node()
	{
		if (++nodes_ > limits_.max_nodes)
			error("more than " + std::to_string(limits_.max_nodes) + " values");
	}

	static bool bare_key_char(char c)
	{
		return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
	}

	std::vector<std::string> key_path()
	{
		std::vector<std::string> path;
		for (;;) {
			std::string key;
			if (peek() == '"') {
				key = basic_string();
			} else if (peek() == '\'') {
				key = literal_string();
			} else {
				const std::size_t start = pos_;
				while (!eof() && bare_key_char(peek()))
					pos_++;
				if (pos_ == start)
					error("expected a key");
				key = std::string(s_.substr(start, pos_ - start));
			}
			path.push_back(std::move(key));
			if (path.size() > limits_.max_depth)
				error("a key nested deeper than " + std::to_string(limits_.max_depth) + " levels");
			skip_ws();
			if (peek() != '.')
				return path;
			pos_++;
			skip_ws();
		}
	}

	json *open_table(json &root, const std::vector<std::string> &path, bool array)
	{
		json *t = &root;
		for (std::size_t i = 0; i < path.size(); i++) {
			const bool last = i + 1 == path.size();
			auto it = t->find(path[i]);
			if (last && array) {
				if (it == t->end())
					(*t)[path[i]] = json::array();
				else if (!it->is_array())
					error(quoted_key(path[i]) + " is not an array of tables");
				count_node();
				json &arr = (*t)[path[i]];
				arr.push_back(json::object());
				return &arr.back();
			}
			if (it == t->end()) {
				count_node();
				(*t)[path[i]] = json::object();
			}
			json &next = (*t)[path[i]];
			if (next.is_array() && !next.empty() && next.back().is_object())
				t = &next.back();
			else if (next.is_object())
				t = &next;
			else
				error(quoted_key(path[i]) + " is not a table");
		}
		return t;
	}

	void assign(json &table, const std::vector<std::string> &path, json v)
	{
		json *t = &table;
		for (std::size_t i = 0; i + 1 < path.size(); i++) {
			if (!t->contains(path[i])) {
				count_node();
				(*t)[path[i]] = json::object();
			}
			t = &(*t)[path[i]];
			if (!t->is_object())
				error(quoted_key(path[i]) + " is not a table");
		}
		if (t->contains(path.back())) {
			std::string m = "key ";
			error(m.append(quoted_key(path.back())).append(" is defined twice"));
		}
		(*t)[path.back()] = std::move(v);
	}

	json value(unsigned depth)
	{
		if (depth > limits_.max_depth)
			error("nested deeper than " + std::to_string(limits_.max_depth) + " levels");
		count_node();
		const char c = peek();
		if (c == '"')
			return basic_string();
		if (c == '\'')
			return literal_string();
		if (c == '[')
			return array(depth);
		if (c == '{')
			return inline_table(depth);
		return scalar();
	}

	json array(unsigned depth)
	{
		pos_++;
		json a = json::array();
		for (;;) {
			skip_blank_lines();
			if (peek() == ']') {
				pos_++;
				return a;
			}
			if (eof())
				error("expected ']' closing the array");
			a.push_back(value(depth + 1));
			skip_blank_lines();
			if (peek() == ',') {
				pos_++;
				continue;
			}
			if (peek() != ']')
				error("expected ',' or ']' in the array");
		}
	}

	json inline_table(unsigned depth)
	{
		pos_++;
		json t = json::object();
		skip_ws();
		if (peek() == '}') {
			pos_++;
			return t;
		}
		for (;;) {
			skip_ws();
			auto path = key_path();
			skip_ws();
			expect("=", "'=' after the key");
			skip_ws();
			assign(t, path, value(depth + 1));
			skip_ws();
			if (peek() == ',') {
				pos_++;
				continue;
			}
			expect("}", "',' or '}' in the inline table");
			return t;
		}
	}

	void append_utf8(std::string &out, std::uint32_t cp)
	{
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			error("an escape that is not a Unicode scalar value");
		if (cp < 0x80) {
			out += static_cast<char>(cp);
		} else if (cp < 0x800) {
			out += static_cast<char>(0xC0 | (cp >> 6));
			out += static_cast<char>(0x80 | (cp & 0x3F));
		} else if (cp < 0x10000) {
			out += static_cast<char>(0xE0 | (cp >> 12));
			out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
			out += static_cast<char>(0x80 | (cp & 0x3F));
		} else {
			out += static_cast<char>(0xF0 | (cp >> 18));
			out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
			out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
			out += static_cast<char>(0x80 | (cp & 0x3F));
		}
	}

	void escape(std::string &out)
	{
		pos_++;  // the backslash
		const char e = peek();
		pos_++;
		switch (e) {
		case 'b': out += '\b'; return;
		case 't': out += '\t'; return;
		case 'n': out += '\n'; return;
		case 'f': out += '\f'; return;
		case 'r': out += '\r'; return;
		case 'e': out += '\x1b'; return;
		case '"': out += '"'; return;
		case '\\': out += '\\'; return;
		case 'u':
		case 'U': {
			const std::size_t n = e == 'u' ? 4 : 8;
			std::uint32_t cp = 0;
			auto r = std::from_chars(s_.data() + pos_, s_.data() + std::min(s_.size(), pos_ + n), cp, 16);
			if (r.ec != std::errc() || r.ptr != s_.data() + pos_ + n)
				error("expected " + std::to_string(n) + " hex digits after \\" + e);
			pos_ += n;
			append_utf8(out, cp);
			return;
		}
		default: error("an unknown escape in a string");
		}
	}

	std::string basic_string()
	{
		const bool multi = s_.substr(pos_, 3) == "\"\"\"";
		pos_ += multi ? 3 : 1;
		if (multi)
			newline();  // a new line right after the opening quotes is not part of the string
		std::string out;
		for (;;) {
			if (eof())
				error("expected '\"' closing the string");
			const char c = peek();
			if (multi && s_.substr(pos_, 3) == "\"\"\"") {
				pos_ += 3;
				while (peek() == '"' && out.size() < 2) {  // up to two quotes may end the content
					out += '"';
					pos_++;
				}
				return out;
			}
			if (!multi && c == '"') {
				pos_++;
				return out;
			}
			if (c == '\\' && multi && (peek(1) == '\n' || peek(1) == ' ' || peek(1) == '\t' || peek(1) == '\r')) {
				// A line-ending backslash trims the new line and the whitespace after it.
				pos_++;
				for (;;) {
					skip_ws();
					if (!newline())
						break;
				}
				continue;
			}
			if (c == '\\') {
				escape(out);
				continue;
			}
			if (c == '\n' || c == '\r') {
				if (!multi)
					error("expected '\"' closing the string before the end of the line");
				if (newline())
					out += '\n';
				else
					out += s_[pos_++];
				continue;
			}
			out += c;
			pos_++;
		}
	}

	std::string literal_string()
	{
		const bool multi = s_.substr(pos_, 3) == "'''";
		pos_ += multi ? 3 : 1;
		if (multi)
			newline();
		std::string out;
		for (;;) {
			if (eof())
				error("expected \"'\" closing the string");
			if (multi && s_.substr(pos_, 3) == "'''") {
				pos_ += 3;
				while (peek() == '\'' && out.size() < 2) {
					out += '\'';
					pos_++;
				}
				return out;
			}
			const char c = peek();
			if (!multi && c == '\'') {
				pos_++;
				return out;
			}
			if (c == '\n') {
				if (!multi)
					error("expected \"'\" closing the string before the end of the line");
				newline();
				out += '\n';
				continue;
			}
			out += c;
			pos_++;
		}
	}

	json scalar()
	{
		const std::size_t start = pos_;
		// Dates and times may hold one space ("1979-05-27 07:32:00Z"): the token ends at
		// whitespace otherwise, or at what may follow a value.
		while (!eof()) {
			const char c = peek();
			if (c == ',' || c == ']' || c == '}' || c == '#' || c == '\n' || c == '\r' || c == '\t')
				break;
			if (c == ' ' && !(pos_ > start && std::isdigit(static_cast<unsigned char>(s_[pos_ - 1])) &&
					  std::isdigit(static_cast<unsigned char>(peek(1))) && s_.substr(start, pos_ - start).find('-') != std::string_view::npos))
				break;
			pos_++;
		}
		std::string tok(s_.substr(start, pos_ - start));
		if (tok == "true")
			return true;
		if (tok == "false")
			return false;
		if (tok.empty())
			error("expected a value");
		if (tok == "inf" || tok == "+inf" || tok == "-inf" || tok == "nan" || tok == "+nan" || tok == "-nan")
			return tok;  // kept as text: JSON has no such numbers, and containerd's keys we read are not floats
		std::string digits;
		for (char c : tok)
			if (c != '_')
				digits += c;
		const char first = digits[0] == '+' || digits[0] == '-' ? (digits.size() > 1 ? digits[1] : '\0') : digits[0];
		if (!std::isdigit(static_cast<unsigned char>(first)))
			error("expected a value (a string needs quotes)");
		int base = 10;
		std::string_view body = digits;
		if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o' || body[1] == 'b')) {
			base = body[1] == 'x'   ? 16
			       : body[1] == 'o' ? 8
						: 2;
			body.remove_prefix(2);
		}
		std::int64_t i = 0;
		std::string_view signless = body;
		const bool negative = !signless.empty() && signless[0] == '-';
		if (!signless.empty() && (signless[0] == '+' || signless[0] == '-'))
			signless.remove_prefix(1);
		auto r = std::from_chars(signless.data(), signless.data() + signless.size(), i, base);
		if (r.ec == std::errc() && r.ptr == signless.data() + signless.size())
			return negative ? -i : i;
		if (base == 10 && digits.find_first_of(".eE") != std::string::npos && digits.find(':') == std::string::npos) {
			char *end = nullptr;
			const double d = std::strtod(digits.c_str(), &end);
			if (end == digits.c_str() + digits.size())
				return d;
		}
		if (tok.find('-') != std::string::npos || tok.find(':') != std::string::npos)
			return tok;  // a date or a time: kept as its text
		error("expected a value");
	}

	std::string_view s_;
	const ParseLimits &limits_;
	std::size_t pos_ = 0;
	int line_ = 1;
	std::size_t nodes_ = 0;
};

}  // namespace

Result<nlohmann::json> parse_toml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits)
{
	TomlParser p(text, limits);
	try {
		return p.parse();
	} catch (const Failure &f) {
		return fail(make_error(display + ":" + std::to_string(p.line()) + ": " + f.what));
	} catch (const std::exception &e) {  // nlohmann's allocation failures
		return fail(make_error(display + ":" + std::to_string(p.line()) + ": " + e.what()));
	}
}

}  // namespace unbounded
