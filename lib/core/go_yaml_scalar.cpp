// A plain YAML scalar as the CDI library (Go) stores it in a string field: go-yaml v2 resolves the
// scalar by YAML 1.1's rules (resolve.go), then sigs.k8s.io/yaml turns a number or boolean whose
// target is a string back into text (strconv.FormatInt, FormatFloat(v, 'g', -1, 32), "true"); a
// timestamp keeps its text (go-yaml v2 sets one decoded into interface{} as the string it read). A
// pod that writes `name: 0x0` names device "0" to containerd; verify must read the same name.
#include "bounded_parse.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace unbounded {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Go's strconv.ParseUint(s, 0, 64) on an unsigned text: 0x, 0o, 0b prefixes, a leading 0 octal.
std::optional<std::uint64_t> parse_uint_base0(std::string_view s)
{
	int base = 10;
	if (s.size() >= 2 && s[0] == '0') {
		const char p = static_cast<char>(s[1] | 0x20);
		if (p == 'x' || p == 'o' || p == 'b') {
			base = p == 'x' ? 16 : p == 'o' ? 8
							: 2;
			s.remove_prefix(2);
		} else {
			base = 8;
			s.remove_prefix(1);
		}
	}
	if (s.empty())
		return std::nullopt;
	std::uint64_t v = 0;
	const auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
	if (r.ec != std::errc() || r.ptr != s.data() + s.size())
		return std::nullopt;
	return v;
}

// ParseInt(s, 0, 64): an optional sign, then as ParseUint, within int64.
std::optional<std::int64_t> parse_int_base0(std::string_view s)
{
	bool neg = false;
	if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
		neg = s[0] == '-';
		s.remove_prefix(1);
	}
	const auto u = parse_uint_base0(s);
	if (!u)
		return std::nullopt;
	if (!neg && *u > static_cast<std::uint64_t>(INT64_MAX))
		return std::nullopt;
	if (neg && *u > static_cast<std::uint64_t>(INT64_MAX) + 1)
		return std::nullopt;
	return neg ? static_cast<std::int64_t>(0 - *u) : static_cast<std::int64_t>(*u);
}

// go-yaml's yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
bool yaml_style_float(std::string_view s)
{
	std::size_t i = 0;
	if (i < s.size() && (s[i] == '+' || s[i] == '-'))
		i++;
	if (i < s.size() && s[i] == '.') {
		const std::size_t start = ++i;
		while (i < s.size() && is_digit(s[i]))
			i++;
		if (i == start)
			return false;
	} else {
		const std::size_t start = i;
		while (i < s.size() && is_digit(s[i]))
			i++;
		if (i == start)
			return false;
		if (i < s.size() && s[i] == '.') {
			i++;
			while (i < s.size() && is_digit(s[i]))
				i++;
		}
	}
	if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < s.size() && (s[i] == '+' || s[i] == '-'))
			i++;
		const std::size_t start = i;
		while (i < s.size() && is_digit(s[i]))
			i++;
		if (i == start)
			return false;
	}
	return i == s.size();
}

// strconv.FormatFloat(v, 'g', -1, 32): the shortest digits that read back as the same float32, in
// %e form when the exponent is below -4 or at least 6 (Go's rule for the shortest precision).
std::string go_format_float32(double v)
{
	const float f = static_cast<float>(v);
	if (std::isnan(f))
		return "NaN";
	if (std::isinf(f))
		return f > 0 ? "+Inf" : "-Inf";
	std::array<char, 64> buf{};
	const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), std::fabs(f), std::chars_format::scientific);
	const std::string_view sci(buf.data(), static_cast<std::size_t>(r.ptr - buf.data()));  // "1.5e+03"
	const std::size_t e = sci.find('e');
	std::string digits;
	for (const char c : sci.substr(0, e))
		if (c != '.')
			digits += c;
	int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
	while (digits.size() > 1 && digits.back() == '0')
		digits.pop_back();
	if (digits == "0")
		exp10 = 0;
	// Built by appending: GCC 12's -Wrestrict misreads chains of operator+ at -O3.
	std::string out;
	if (std::signbit(f))
		out.push_back('-');
	if (exp10 < -4 || exp10 >= 6) {
		out.append(digits, 0, 1);
		if (digits.size() > 1) {
			out.push_back('.');
			out.append(digits, 1, std::string::npos);
		}
		const int a = std::abs(exp10);
		out.push_back('e');
		out.push_back(exp10 < 0 ? '-' : '+');
		if (a < 10)
			out.push_back('0');
		out.append(std::to_string(a));
		return out;
	}
	const int dp = exp10 + 1;  // digits before the point
	if (dp <= 0) {
		out.append("0.");
		out.append(static_cast<std::size_t>(-dp), '0');
		out.append(digits);
	} else if (static_cast<std::size_t>(dp) >= digits.size()) {
		out.append(digits);
		out.append(static_cast<std::size_t>(dp) - digits.size(), '0');
	} else {
		out.append(digits, 0, static_cast<std::size_t>(dp));
		out.push_back('.');
		out.append(digits, static_cast<std::size_t>(dp), std::string::npos);
	}
	return out;
}

}  // namespace

std::optional<std::string> go_yaml_plain_string(std::string_view in)
{
	static constexpr std::string_view NULLS[] = {"", "~", "null", "Null", "NULL"};
	static constexpr std::string_view TRUES[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
	static constexpr std::string_view FALSES[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
	auto in_list = [&](const auto &list) { return std::find(std::begin(list), std::end(list), in) != std::end(list); };
	if (in_list(NULLS))
		return std::nullopt;
	if (in_list(TRUES))
		return "true";
	if (in_list(FALSES))
		return "false";
	if (in == ".nan" || in == ".NaN" || in == ".NAN")
		return "NaN";
	if (in == ".inf" || in == ".Inf" || in == ".INF" || in == "+.inf" || in == "+.Inf" || in == "+.INF")
		return "+Inf";
	if (in == "-.inf" || in == "-.Inf" || in == "-.INF")
		return "-Inf";
	const char first = in[0];
	if (first == '.') {
		if (yaml_style_float(in))
			return go_format_float32(std::strtod(std::string(in).c_str(), nullptr));
		return std::string(in);
	}
	if (!is_digit(first) && first != '+' && first != '-')
		return std::string(in);
	std::string plain(in);
	plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
	if (auto i = parse_int_base0(plain))
		return std::to_string(*i);
	if (plain[0] != '+' && plain[0] != '-')
		if (auto u = parse_uint_base0(plain))
			return std::to_string(*u);
	if (yaml_style_float(plain))
		return go_format_float32(std::strtod(plain.c_str(), nullptr));
	return std::string(in);
}

}  // namespace unbounded
