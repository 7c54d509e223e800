// Whether a staged file is a Windows PE image (elf.hpp). Contract: true exactly when the bytes are
// "MZ", then "PE\0\0" at the 32-bit little-endian offset at 0x3c, past the 64-byte DOS header and
// inside the file.
#define FUZZ_NAME "pe"
#include "fuzz_target.hpp"

#include "elf.hpp"

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace unbounded;

FUZZ_TARGET
{
	static const int fd = ::memfd_create("pe", MFD_CLOEXEC);
	if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
		fuzz::violated(FUZZ_NAME, "memfd", "cannot write the input");
	const bool is_pe = pe::is_pe_file(fd, static_cast<off_t>(size));
	bool expected = false;
	if (size >= 64 && data[0] == 'M' && data[1] == 'Z') {
		const std::uint64_t at = std::uint64_t(data[0x3c]) | std::uint64_t(data[0x3d]) << 8 | std::uint64_t(data[0x3e]) << 16 |
					 std::uint64_t(data[0x3f]) << 24;
		expected = at >= 64 && at + 4 <= size && std::memcmp(data + at, "PE\0\0", 4) == 0;
	}
	FUZZ_REQUIRE(is_pe == expected, is_pe ? "taken as PE" : "not taken as PE");
	return 0;
}
