// /proc/self/mountinfo, as MountTable reads it (constant memory, libmount's unescaping). Contract:
// a table or one printable error line; every mount kept is a direct child of the parent asked for;
// a line over the cap (MAX_LINE, 3 * PATH_MAX) is skipped, never kept, and the line after it is
// read as if it were not there.
#define FUZZ_NAME "mountinfo"
#include "fuzz_target.hpp"

#include "mounts.hpp"

#include <climits>

using namespace unbounded;

namespace {

constexpr std::size_t MAX_LINE = 3 * PATH_MAX;  // mounts.cpp

const char *const ASKED[] = {"/run/host-nvidia/0", "/run/host-nvidia/1", "/run/host-nvidia", "/run/host-nvidia/0/x"};

}  // namespace

FUZZ_TARGET
{
	const std::string path = fuzz::scratch() + "/mountinfo";
	fuzz::write_file(path, text);
	auto t = MountTable::load("/run/host-nvidia", path);
	if (!t) {
		FUZZ_REQUIRE_LINE(t.error().message);
		return 0;
	}
	for (const char *p : ASKED) {
		auto e = t->mount_at(p);
		if (e)
			FUZZ_REQUIRE(e->target == p, e->target);
	}
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		// After the input: a mount of /run/host-nvidia/0 one byte over the cap (its options padded),
		// then one of /run/host-nvidia/1 within it. /0 is what the input alone made it, /1 is the second.
		// No empty line is added: the input's lines are all the broken build (mounts.cpp with
		// fuzz/broken_mounts.cpp's field scan) may trip on, so check-fuzz's proof stays the fuzzer's find.
		std::string body(text);
		if (!body.empty() && body.back() == fuzz::OVER_CAP_FLAG)
			body.pop_back();
		if (!body.empty() && body.back() != '\n')
			body += '\n';
		const std::string head = "90 22 0:25 /over /run/host-nvidia/0 ro,";
		const std::string tail = " - ext4 /dev/sda1 rw";
		std::string over = head + std::string(MAX_LINE + 1 - head.size() - tail.size(), 'x') + tail;
		const std::string next = "91 22 0:25 /after /run/host-nvidia/1 ro - ext4 /dev/sda1 rw";
		fuzz::write_file(path, body);
		auto before = MountTable::load("/run/host-nvidia", path);
		FUZZ_REQUIRE(before.has_value(), before ? std::string() : before.error().message);
		fuzz::write_file(path, body + over + "\n" + next + "\n");
		auto o = MountTable::load("/run/host-nvidia", path);
		FUZZ_REQUIRE(o.has_value(), o ? std::string() : o.error().message);
		auto zero = o->mount_at("/run/host-nvidia/0"), zero_before = before->mount_at("/run/host-nvidia/0");
		FUZZ_REQUIRE(zero.has_value() == zero_before.has_value() && (!zero || zero->root == zero_before->root),
			     "a line of " + std::to_string(over.size()) + " bytes was kept");
		auto one = o->mount_at("/run/host-nvidia/1");
		FUZZ_REQUIRE(one && one->root == "/after" && one->fstype == "ext4", "the line after an over-long one was lost");
	}
	return 0;
}
