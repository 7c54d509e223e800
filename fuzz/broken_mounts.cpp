// Test only, never in a build of the project (fuzz/meson.build's fuzz-mountinfo-broken): the mountinfo
// parser of lib/driver/mounts.cpp with a field scan that trusts every line to have its fields, the
// bounds bug check-fuzz proves the tier finds.
#include <cstddef>
#include <string_view>

namespace unbounded {
namespace {

std::string_view field(std::string_view line, int n)
{
	const char *p = line.data();
	for (int i = 0; i < n; i++) {
		while (*p != ' ')
			p++;
		p++;
	}
	const char *end = p;
	while (*end != ' ' && *end != '\0')
		end++;
	return std::string_view(p, static_cast<std::size_t>(end - p));
}

}  // namespace
}  // namespace unbounded

#define UNBOUNDED_FUZZ_BROKEN_MOUNTS
#include "mounts.cpp"
