// /proc/self/mountinfo, as MountTable reads it (constant memory, libmount's unescaping). Contract:
// a table or one printable error line; every mount kept is a direct child of the parent asked for.
#define FUZZ_NAME "mountinfo"
#include "fuzz_target.hpp"

#include "mounts.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	const std::string path = fuzz::scratch() + "/mountinfo";
	fuzz::write_file(path, text);
	auto t = MountTable::load("/run/host-nvidia", path);
	if (!t) {
		FUZZ_REQUIRE_LINE(t.error().message);
		return 0;
	}
	for (const char *p : {"/run/host-nvidia/0", "/run/host-nvidia/1", "/run/host-nvidia", "/run/host-nvidia/0/x"}) {
		auto e = t->mount_at(p);
		if (e)
			FUZZ_REQUIRE(e->target == p, e->target);
	}
	return 0;
}
