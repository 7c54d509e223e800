// /proc/devices: the character majors by driver name. Contract: names are trimmed and not empty,
// majors are what the line said (only "Character devices:" lines count); read as CharMajors reads
// it, the same majors, and a file over the cap (64 KiB) is one printable error line.
#define FUZZ_NAME "proc_devices"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "mig.hpp"

#include <cerrno>

using namespace unbounded;

namespace {
constexpr std::size_t MAX_PROC_DEVICES_BYTES = 64 * 1024;  // CharMajors' read (mig.cpp)
}

FUZZ_TARGET
{
	const auto majors = parse_proc_devices(text);
	for (const auto &[name, major] : majors) {
		FUZZ_REQUIRE(!name.empty(), "empty name");
		FUZZ_REQUIRE(name.front() != ' ' && name.back() != ' ' && name.front() != '\t' && name.back() != '\t', name);
		FUZZ_REQUIRE(text.find(name) != std::string_view::npos, name);
		FUZZ_REQUIRE(text.find(std::to_string(major)) != std::string_view::npos || major == 0, name);
	}
	const Context &ctx = fuzz::machine_context(FUZZ_NAME, {"proc"});
	if (text.size() <= MAX_PROC_DEVICES_BYTES) {
		fuzz::write_file(ctx.root + PROC_DEVICES, text);
		CharMajors read(ctx);
		FUZZ_REQUIRE(read.get() && *read.get() == majors, read.get() ? std::string("other majors") : read.get().error().message);
	}
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		fuzz::write_file(ctx.root + PROC_DEVICES, fuzz::over_cap(text, MAX_PROC_DEVICES_BYTES, '\n'));
		CharMajors over(ctx);
		const auto &o = over.get();
		FUZZ_REQUIRE(!o && o.error().errnum == EFBIG, o ? std::string("read") : o.error().message);
		FUZZ_REQUIRE_LINE(o.error().message);
	}
	return 0;
}
