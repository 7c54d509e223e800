#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

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

bool numeric_name_less(std::string_view a, std::string_view b)
{
	const bool na = all_digits(a), nb = all_digits(b);
	if (na && nb)  // by length, then digit by digit: numeric order without overflow
		return a.size() != b.size() ? a.size() < b.size() : a < b;
	if (na != nb)
		return na;
	return a < b;
}

}  // namespace unbounded
