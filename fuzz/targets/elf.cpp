// An ELF file of the staged driver, read with pread() from its fd. Contract: one printable error
// line, or facts whose DT_NEEDED names are all NVIDIA's (elf.hpp), at most MAX_NEEDED (256) of them,
// with a valid SONAME; over the program header cap (4096 entries) the same file is refused in one
// line.
#define FUZZ_NAME "elf"
#include "fuzz_target.hpp"

#include "elf.hpp"
#include "unique_fd.hpp"

#include <cstring>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace unbounded;

namespace {

constexpr std::size_t MAX_NEEDED = 256;    // elf.cpp: more DT_NEEDED entries are not read
constexpr std::uint16_t MAX_PHNUM = 4096;  // elf.cpp: more program headers are refused

Result<elf::Info> read(std::string_view bytes)
{
	static const int fd = ::memfd_create("elf", MFD_CLOEXEC);
	if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
		fuzz::violated(FUZZ_NAME, "memfd", "cannot write the input");
	return elf::read_info(fd, "/run/host-nvidia/0/libcuda.so.535.104.05");
}

// The input with e_phnum one over the cap (and e_phentsize right, so the count is what refuses it);
// "" when the input has no ELF header of a class read_info parses.
std::string over_phnum(std::string_view text)
{
	std::string s(text);
	std::size_t entsize_at = 0, num_at = 0;
	std::uint16_t entsize = 0;
	if (s.size() >= sizeof(Elf64_Ehdr) && s[EI_CLASS] == ELFCLASS64) {
		entsize_at = offsetof(Elf64_Ehdr, e_phentsize);
		num_at = offsetof(Elf64_Ehdr, e_phnum);
		entsize = sizeof(Elf64_Phdr);
	} else if (s.size() >= sizeof(Elf32_Ehdr) && s[EI_CLASS] == ELFCLASS32) {
		entsize_at = offsetof(Elf32_Ehdr, e_phentsize);
		num_at = offsetof(Elf32_Ehdr, e_phnum);
		entsize = sizeof(Elf32_Phdr);
	} else {
		return {};
	}
	const std::uint16_t num = MAX_PHNUM + 1;
	std::memcpy(s.data() + entsize_at, &entsize, 2);  // little-endian hosts: the byte order read_info reads
	std::memcpy(s.data() + num_at, &num, 2);
	return s;
}

}  // namespace

FUZZ_TARGET
{
	auto r = read(text);
	if (!r) {
		FUZZ_REQUIRE_LINE(r.error().message);
	} else {
		FUZZ_REQUIRE(r->needed.size() <= MAX_NEEDED, std::to_string(r->needed.size()));
		for (const auto &n : r->needed)
			FUZZ_REQUIRE(elf::is_driver_library_name(n) && elf::valid_soname(n), n);
		if (r->soname)
			FUZZ_REQUIRE(elf::valid_soname(*r->soname), *r->soname);
		(void)elf::multiarch_for(r->machine, r->is_64bit);
	}
	if (const std::string over = over_phnum(text); !over.empty()) {
		auto o = read(over);
		FUZZ_REQUIRE(!o, "a header table of " + std::to_string(MAX_PHNUM + 1) + " entries was read");
		FUZZ_REQUIRE_LINE(o.error().message);
	}
	return 0;
}
