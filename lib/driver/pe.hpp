// Whether a file is a Windows PE image (the DLSS DLLs Proton copies into a game's prefix): the DOS
// header's "MZ", then at its e_lfanew (offset 0x3c) the PE signature "PE\0\0". "MZ" alone is two
// bytes any file may start with.
#pragma once

#include <sys/types.h>

namespace unbounded::pe {

// Reads at most the 64-byte DOS header and the 4-byte signature of the open file of `size` bytes.
bool is_pe_file(int fd, off_t size);

}  // namespace unbounded::pe
