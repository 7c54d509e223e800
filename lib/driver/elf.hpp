// Minimal ELF reader: machine, DT_SONAME and the driver's own DT_NEEDED entries, read with pread() so it works on any fd without mmap.
// And whether a file is a Windows PE image (the DLSS DLLs Proton copies into a game's prefix): the DOS
// header's "MZ", then at its e_lfanew (offset 0x3c) the PE signature "PE\0\0". "MZ" alone is two
// bytes any file may start with.
#pragma once

#include "error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace unbounded::elf {

struct Info {
	std::uint16_t machine = 0;  // e_machine (EM_X86_64, EM_AARCH64, ...)
	bool is_64bit = false;
	std::optional<std::string> soname;
	std::vector<std::string> needed;  // DT_NEEDED entries that name NVIDIA libraries (is_driver_library_name)
};

// Fails with a message naming `display` when the file is not a well-formed ELF object.
Result<Info> read_info(int fd, const std::string &display);

// A DT_SONAME we may turn into a link name: one plain file name of [A-Za-z0-9._+-], not "." or "..",
// at most 255 bytes. Applied to fresh reads and to memoised ones alike.
bool valid_soname(std::string_view name);

// A name of NVIDIA's driver libraries: libnvidia-*, libcuda*, lib*_nvidia.so* (libEGL_nvidia, ...).
// Everything else a driver library needs (libc, libm, libX11, ...) is the image's.
bool is_driver_library_name(std::string_view name);

// The multiarch tuple of the machine this program runs on ("x86_64-linux-gnu").
std::string native_multiarch();

// Debian multiarch tuple for an ELF machine ("x86_64-linux-gnu"); empty when unknown.
std::string multiarch_for(std::uint16_t machine, bool is_64bit);

}  // namespace unbounded::elf

namespace unbounded::pe {

// Reads at most the 64-byte DOS header and the 4-byte signature of the open file of `size` bytes.
bool is_pe_file(int fd, off_t size);

}  // namespace unbounded::pe
