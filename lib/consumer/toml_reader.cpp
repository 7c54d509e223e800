#include "toml_reader.hpp"

// toml++ 3.3 checks its parser's own assumptions with assert(), which a file can break ("[" alone on
// a line, found by the fuzz tier): with NDEBUG unset here and TOML_ASSERT ours, a broken one is a
// parse error of that file, never an abort, and never an assumption the optimiser acts on.
#undef NDEBUG
namespace unbounded::toml_check {
struct Failed {
	const char *what;
};
[[noreturn]] inline void failed(const char *what) { throw Failed{what}; }
}  // namespace unbounded::toml_check
#define TOML_ASSERT(expr) ((expr) ? static_cast<void>(0) : ::unbounded::toml_check::failed(#expr))
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_UNRELEASED_FEATURES 1
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

namespace unbounded {
namespace {

using json = nlohmann::json;

struct TooBig {
	std::string what;
};

class Converter {
public:
	explicit Converter(const ParseLimits &limits) : limits_(limits) {}

	json value(const toml::node &n, unsigned depth)
	{
		if (++nodes_ > limits_.max_nodes)
			throw TooBig{"more than " + std::to_string(limits_.max_nodes) + " values"};
		if (depth > limits_.max_depth)
			throw TooBig{"nested deeper than " + std::to_string(limits_.max_depth) + " levels"};
		if (const auto *t = n.as_table()) {
			json o = json::object();
			for (const auto &[k, v] : *t)
				o[std::string(k.str())] = value(v, depth + 1);
			return o;
		}
		if (const auto *a = n.as_array()) {
			json arr = json::array();
			for (const auto &v : *a)
				arr.push_back(value(v, depth + 1));
			return arr;
		}
		if (const auto *s = n.as_string())
			return s->get();
		if (const auto *i = n.as_integer())
			return i->get();
		if (const auto *f = n.as_floating_point())
			return f->get();
		if (const auto *b = n.as_boolean())
			return b->get();
		// Dates and times: never a value verify reads; their text is enough.
		std::ostringstream text;
		if (const auto *d = n.as_date())
			text << d->get();
		else if (const auto *t = n.as_time())
			text << t->get();
		else if (const auto *dt = n.as_date_time())
			text << dt->get();
		return text.str();
	}

private:
	const ParseLimits &limits_;
	std::size_t nodes_ = 0;
};

// The first byte that is not printable ASCII, tab or a line end (a byte-order mark at the start
// aside): a control byte is in no TOML text but as an escape, and toml++ 3.3 reaches a
// __builtin_unreachable() classifying some non-ASCII characters on its error paths (the fuzz tier's
// find). Anywhere in the text, in strings and comments too, after a backslash included: a reader
// that skipped any part would hand toml++ that byte on the path that misreads it. The runtimes' files
// are ASCII; one that is not is past verify's limits (PARSE_LIMIT_ERRNO), named: a known,
// conservative difference (tests/README.md).
std::size_t first_unread_byte(std::string_view t)
{
	const std::size_t from = t.starts_with("\xef\xbb\xbf") ? 3 : 0;
	for (std::size_t i = from; i < t.size(); i++) {
		const auto c = static_cast<unsigned char>(t[i]);
		if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c >= 0x7f)
			return i;
	}
	return std::string_view::npos;
}

}  // namespace

Result<json> parse_toml_bounded(std::string_view text, const std::string &display, const ParseLimits &limits)
{
	if (const std::size_t at = first_unread_byte(text); at != std::string_view::npos) {
		// A limit of ours, not a file the runtime refuses (it may read a UTF-8 comment): not known.
		const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
		Error e = make_error(display + ":" + std::to_string(line) + ": a control byte or a byte over 0x7f, which verify does not read in TOML files");
		e.errnum = PARSE_LIMIT_ERRNO;
		return fail(std::move(e));
	}
	try {
		const toml::table table = toml::parse(text, display);
		Converter c(limits);
		return c.value(table, 0);
	} catch (const toml_check::Failed &f) {
		return fail(make_error(display + ": not TOML that toml++ reads (its check " + printable(f.what) + " failed)"));
	} catch (const toml::parse_error &e) {
		const auto &where = e.source().begin;
		std::string_view what = e.description();
		if (what.starts_with("Error while "))  // toml++'s own prefix: "Error while parsing value: ..."
			what.remove_prefix(std::string_view("Error while ").size());
		if (what.find("exceeded maximum nested value depth") != std::string_view::npos) {
			Error err = make_error(display + ":" + std::to_string(where.line) + ": nested deeper than " +
					       std::to_string(limits.max_depth) + " levels");
			err.errnum = PARSE_LIMIT_ERRNO;
			return fail(std::move(err));
		}
		return fail(make_error(display + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " + printable(what)));
	} catch (const TooBig &t) {
		Error e = make_error(display + ": " + t.what);
		e.errnum = PARSE_LIMIT_ERRNO;
		return fail(std::move(e));
	}
}

const nlohmann::json *table_at(const nlohmann::json &doc, std::initializer_list<const char *> keys)
{
	const nlohmann::json *at = &doc;
	for (const char *k : keys) {
		if (!at->is_object() || !at->contains(k))
			return nullptr;
		at = &(*at)[k];
	}
	return at;
}

}  // namespace unbounded
