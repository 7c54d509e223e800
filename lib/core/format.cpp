#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

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

// "3" -> {"3"}, "3:1" -> {"3", "1"}; empty for a name that is not digits joined by ':'.
std::vector<std::string_view> index_parts(std::string_view s)
{
	std::vector<std::string_view> parts;
	for (;;) {
		auto colon = s.find(':');
		if (!all_digits(s.substr(0, colon)))
			return {};
		parts.push_back(s.substr(0, colon));
		if (colon == std::string_view::npos)
			return parts;
		s.remove_prefix(colon + 1);
	}
}

}  // namespace

bool numeric_name_less(std::string_view a, std::string_view b)
{
	const auto pa = index_parts(a), pb = index_parts(b);
	const bool na = !pa.empty(), nb = !pb.empty();
	if (na && nb)  // part by part; each by length, then digit by digit: numeric order without overflow
		return std::lexicographical_compare(pa.begin(), pa.end(), pb.begin(), pb.end(), [](std::string_view x, std::string_view y) {
			return x.size() != y.size() ? x.size() < y.size() : x < y;
		});
	if (na != nb)
		return na;
	return a < b;
}

}  // namespace unbounded
