#include "pe.hpp"

#include <cstdint>
#include <cstring>
#include <unistd.h>

namespace unbounded::pe {

bool is_pe_file(int fd, off_t size)
{
	constexpr off_t DOS_HEADER = 64, E_LFANEW = 0x3c;
	unsigned char dos[DOS_HEADER];
	if (size < DOS_HEADER + 4 || ::pread(fd, dos, sizeof(dos), 0) != DOS_HEADER || dos[0] != 'M' || dos[1] != 'Z')
		return false;
	const std::uint32_t lfanew = static_cast<std::uint32_t>(dos[E_LFANEW]) | static_cast<std::uint32_t>(dos[E_LFANEW + 1]) << 8 |
				     static_cast<std::uint32_t>(dos[E_LFANEW + 2]) << 16 | static_cast<std::uint32_t>(dos[E_LFANEW + 3]) << 24;
	// The signature follows the DOS header and lies inside the file: an offset past its end (or
	// into the header itself) is not one, and is never read.
	if (lfanew < DOS_HEADER || static_cast<std::uint64_t>(lfanew) + 4 > static_cast<std::uint64_t>(size))
		return false;
	char sig[4];
	return ::pread(fd, sig, sizeof(sig), static_cast<off_t>(lfanew)) == 4 && std::memcmp(sig, "PE\0\0", 4) == 0;
}

}  // namespace unbounded::pe
