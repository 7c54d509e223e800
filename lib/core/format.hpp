// Small text helpers: human-readable figures for log lines and STATUS= ("150.2 MiB", "210ms"), and
// the digit checks and numeric ordering that staging names, device minors and CDI names share.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace unbounded {

std::string format_bytes(std::uint64_t bytes);
std::string format_ms(std::chrono::milliseconds ms);

// A file mode as operators read it: "0644".
std::string format_mode(unsigned mode);
// Non-empty and only [A-Za-z0-9._+-]: how every file of an NVIDIA driver, and every SONAME, is named.
bool is_plain_file_name(std::string_view s);
// Non-empty and only ASCII digits.
bool all_digits(std::string_view s);
// Index names first, in numeric order ("2" before "10", "1" before "1:0" before "1:2" before "1:10"),
// then the others by name.
bool numeric_name_less(std::string_view a, std::string_view b);
// The parts joined, sized once. Why not a chain of operator+: g++ 12 at -O3 for aarch64 inlines such
// chains into memcpy calls it then warns about (-Wrestrict, a false positive that -Werror makes fatal).
std::string concat(std::initializer_list<std::string_view> parts);
// `s` without the blanks (spaces, tabs, CR and LF) at either end.
std::string_view trim_blanks(std::string_view s);

}  // namespace unbounded
