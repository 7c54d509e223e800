// Minimal ELF reader: machine and DT_SONAME, read with pread() so it works on any fd without mmap.
#pragma once

#include "error.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace unbounded::elf {

struct Info {
	std::uint16_t machine = 0;   // e_machine (EM_X86_64, EM_AARCH64, ...)
	bool is_64bit = false;
	std::optional<std::string> soname;
};

// Fails with a message naming `display` when the file is not a well-formed ELF object.
Result<Info> read_info(int fd, const std::string &display);

// Debian multiarch tuple for an ELF machine ("x86_64-linux-gnu"); empty when unknown.
std::string multiarch_for(std::uint16_t machine, bool is_64bit);

}  // namespace unbounded::elf
