// An ELF file of the staged driver, read with pread() from its fd. Contract: one printable error
// line, or facts whose DT_NEEDED names are all NVIDIA's (elf.hpp); the SONAME is validated by the
// callers (valid_soname), which must not trip on it.
#define FUZZ_NAME "elf"
#include "fuzz_target.hpp"

#include "elf.hpp"
#include "unique_fd.hpp"

#include <sys/mman.h>
#include <unistd.h>

using namespace unbounded;

FUZZ_TARGET
{
	static const int fd = ::memfd_create("elf", MFD_CLOEXEC);
	if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
		fuzz::violated(FUZZ_NAME, "memfd", "cannot write the input");
	auto r = elf::read_info(fd, "/run/host-nvidia/0/libcuda.so.535.104.05");
	if (!r) {
		FUZZ_REQUIRE_LINE(r.error().message);
		return 0;
	}
	for (const auto &n : r->needed)
		FUZZ_REQUIRE(elf::is_driver_library_name(n), n);
	if (r->soname)
		(void)elf::valid_soname(*r->soname);
	(void)elf::multiarch_for(r->machine, r->is_64bit);
	return 0;
}
