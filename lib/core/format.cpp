#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

namespace unbounded {

std::string format_bytes(std::uint64_t bytes)
{
	char buf[32];
	if (bytes < 1024)
		std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
	else if (bytes < (1u << 20))
		std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
	else if (bytes < (1ull << 30))
		std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
	else
		std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
	return buf;
}

std::string format_ms(std::chrono::milliseconds ms)
{
	if (ms.count() < 10'000)
		return std::to_string(ms.count()) + "ms";
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms.count()) / 1000.0);
	return buf;
}

std::string format_mode(unsigned mode)
{
	char buf[8];
	std::snprintf(buf, sizeof(buf), "%04o", mode & 07777);
	return buf;
}

bool is_plain_file_name(std::string_view s)
{
	if (s.empty())
		return false;
	for (char c : s)
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || c == '+'))
			return false;
	return true;
}

bool all_digits(std::string_view s)
{
	return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

namespace {

// The next part of an index name ("3:1" -> "3", then "1"), taken off `s`; nullopt when that part is
// not digits, so the name is no index name.
std::optional<std::string_view> next_index_part(std::string_view &s)
{
	const auto colon = s.find(':');
	const std::string_view part = s.substr(0, colon);
	if (!all_digits(part))
		return std::nullopt;
	s.remove_prefix(colon == std::string_view::npos ? s.size() : colon + 1);
	return part;
}

bool is_index_name(std::string_view s)
{
	while (!s.empty())
		if (!next_index_part(s))
			return false;
	return true;
}

}  // namespace

bool numeric_name_less(std::string_view a, std::string_view b)
{
	const bool na = !a.empty() && a.back() != ':' && is_index_name(a), nb = !b.empty() && b.back() != ':' && is_index_name(b);
	if (na && nb) {  // part by part; each by length, then digit by digit: numeric order without overflow
		while (!a.empty() && !b.empty()) {
			const std::string_view x = *next_index_part(a), y = *next_index_part(b);
			if (x != y)
				return x.size() != y.size() ? x.size() < y.size() : x < y;
		}
		return a.empty() && !b.empty();
	}
	if (na != nb)
		return na;
	return a < b;
}

std::string concat(std::initializer_list<std::string_view> parts)
{
	std::size_t size = 0;
	for (auto p : parts)
		size += p.size();
	std::string out;
	out.reserve(size);
	for (auto p : parts)
		out.append(p);
	return out;
}

std::string_view trim_blanks(std::string_view s)
{
	constexpr std::string_view blanks = " \t\r\n";
	const auto b = s.find_first_not_of(blanks);
	if (b == std::string_view::npos)
		return {};
	return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

}  // namespace unbounded
