#include "elf.hpp"

#include "format.hpp"

#include <cstdint>
#include <cstring>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace unbounded::elf {
namespace {

Result<void> pread_exact(int fd, void *buf, std::size_t len, std::uint64_t off, const std::string &display)
{
	auto *p = static_cast<char *>(buf);
	while (len > 0) {
		ssize_t n = ::pread(fd, p, len, static_cast<off_t>(off));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(last_errno_error("Failed to read ELF data of " + display));
		}
		if (n == 0)
			return fail(make_error("Failed to parse " + display + ": truncated ELF file", EXIT_NOT_READY, EIO));
		p += n;
		len -= static_cast<std::size_t>(n);
		off += static_cast<std::uint64_t>(n);
	}
	return {};
}

// Reads through a copy of the file's first 64 KiB, where the headers, the dynamic section and the
// string table of a shared object normally are: one pread() instead of five per library.
class Reader {
public:
	Reader(int fd, const std::string &display, std::uint64_t size) : fd_(fd), display_(display), size_(size) {}

	Result<void> load_head()
	{
		head_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size_, 64 * 1024)));
		return pread_exact(fd_, head_.data(), head_.size(), 0, display_);
	}
	Result<void> read(void *buf, std::size_t len, std::uint64_t off) const
	{
		// Written so that no offset the file gives can wrap around (off + len did), and nothing is
		// copied for an empty read (memcpy's pointers may then be null).
		if (off <= head_.size() && len <= head_.size() - off) {
			if (len)
				std::memcpy(buf, head_.data() + off, len);
			return {};
		}
		return pread_exact(fd_, buf, len, off, display_);
	}

private:
	int fd_;
	const std::string &display_;
	std::uint64_t size_;
	std::vector<char> head_;
};

// More DT_NEEDED entries than any real library has (NVIDIA's have under 12) are not read.
constexpr std::size_t MAX_NEEDED = 256;

Error bad(const std::string &display, const char *why)
{
	return make_error("Failed to parse " + display + ": " + why, EXIT_NOT_READY, ENOEXEC);
}

// What the dynamic section says, up to its DT_NULL: where the string table is, and the string
// offsets of DT_SONAME and of the first MAX_NEEDED DT_NEEDED entries.
struct DynFacts {
	std::uint64_t strtab_vaddr = 0, strsz = 0, soname_off = 0;
	bool have_soname = false, have_strtab = false;
	std::vector<std::uint64_t> needed_offs;
};

template <typename Dyn> DynFacts dyn_facts(const std::vector<Dyn> &dyns)
{
	DynFacts f;
	for (const auto &d : dyns) {
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_STRTAB) {
			f.strtab_vaddr = d.d_un.d_ptr;
			f.have_strtab = true;
		} else if (d.d_tag == DT_STRSZ) {
			f.strsz = d.d_un.d_val;
		} else if (d.d_tag == DT_SONAME) {
			f.soname_off = d.d_un.d_val;
			f.have_soname = true;
		} else if (d.d_tag == DT_NEEDED && f.needed_offs.size() < MAX_NEEDED) {
			f.needed_offs.push_back(d.d_un.d_val);
		}
	}
	return f;
}

// A virtual address as a file offset, through the PT_LOAD covering it; nullopt when none does.
template <typename Phdr>
std::optional<std::uint64_t> file_offset_of(const std::vector<Phdr> &ph, std::uint64_t vaddr, std::uint64_t file_size)
{
	for (const auto &p : ph)
		if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr - p.p_vaddr < p.p_filesz && p.p_offset <= file_size &&
		    vaddr - p.p_vaddr <= file_size - p.p_offset)
			return vaddr - p.p_vaddr + p.p_offset;
	return std::nullopt;
}

// The NUL-terminated string at `off` in the string table at file offset `strtab_off` (at most
// 4 KiB of it is kept), read in small chunks.
Result<std::string> read_strtab_string(const Reader &rd, const std::string &display, std::uint64_t file_size, std::uint64_t strtab_off,
				       std::uint64_t off)
{
	if (off > file_size - strtab_off)  // strtab_off <= file_size (file_offset_of)
		return fail(bad(display, "truncated ELF file (string table)"));
	std::uint64_t pos = strtab_off + off;
	std::string name;
	char buf[256];
	while (name.size() < 4096) {
		if (pos >= file_size)
			return fail(bad(display, "truncated ELF file (string table)"));
		std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof(buf), file_size - pos));
		if (auto r = rd.read(buf, chunk, pos); !r)
			return fail(r.error());
		const void *nul = std::memchr(buf, '\0', chunk);
		if (nul) {
			name.append(buf, static_cast<const char *>(nul) - buf);
			break;
		}
		name.append(buf, chunk);
		pos += chunk;
	}
	return name;
}

// The parsing is written once for both classes; Ehdr/Phdr/Dyn are the class-specific structs.
template <typename Ehdr, typename Phdr, typename Dyn>
Result<Info> parse(const Reader &rd, const std::string &display, std::uint64_t file_size)
{
	if (file_size < sizeof(Ehdr))
		return fail(bad(display, "truncated ELF header"));
	Ehdr eh;
	if (auto r = rd.read(&eh, sizeof(eh), 0); !r)
		return fail(r.error());
	Info info;
	info.machine = eh.e_machine;
	info.is_64bit = sizeof(Ehdr) == sizeof(Elf64_Ehdr);
	if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096)
		return fail(bad(display, "bad program header table"));
	// Each bound as "a > size || b > size - a": a sum near 2^64 would wrap past the check.
	if (eh.e_phoff > file_size || std::uint64_t(eh.e_phnum) * sizeof(Phdr) > file_size - eh.e_phoff)
		return fail(bad(display, "truncated ELF file (program headers)"));

	std::vector<Phdr> ph(eh.e_phnum);
	if (auto r = rd.read(ph.data(), ph.size() * sizeof(Phdr), eh.e_phoff); !r)
		return fail(r.error());

	const Phdr *dyn = nullptr;
	for (const auto &p : ph)
		if (p.p_type == PT_DYNAMIC)
			dyn = &p;
	if (!dyn)
		return info;  // static executable or object without dynamic section: no SONAME
	if (dyn->p_offset > file_size || dyn->p_filesz > file_size - dyn->p_offset || dyn->p_filesz > (16u << 20))
		return fail(bad(display, "truncated ELF file (dynamic section)"));

	std::vector<Dyn> dyns(dyn->p_filesz / sizeof(Dyn));
	if (auto r = rd.read(dyns.data(), dyns.size() * sizeof(Dyn), dyn->p_offset); !r)
		return fail(r.error());

	const DynFacts df = dyn_facts(dyns);
	if (!df.have_soname && df.needed_offs.empty())
		return info;
	if (!df.have_strtab || (df.have_soname && df.soname_off >= df.strsz))
		return fail(bad(display, "DT_SONAME outside the string table"));

	// DT_STRTAB is a virtual address: map it to a file offset through the PT_LOAD covering it.
	const auto mapped = file_offset_of(ph, df.strtab_vaddr, file_size);
	if (!mapped)
		return fail(bad(display, "DT_STRTAB not in a loadable segment"));
	const std::uint64_t strtab_off = *mapped;

	auto read_string = [&](std::uint64_t off) { return read_strtab_string(rd, display, file_size, strtab_off, off); };
	if (df.have_soname) {
		auto name = read_string(df.soname_off);
		if (!name)
			return fail(name.error());
		if (!valid_soname(*name))
			return fail(bad(display, "invalid DT_SONAME"));
		info.soname = std::move(*name);
	}
	// Only the driver's own dependencies are kept: the closure check asks about nothing else, and
	// a needed entry that is not a plain name is no library anyone can provide.
	for (std::uint64_t off : df.needed_offs) {
		if (off >= df.strsz)
			return fail(bad(display, "DT_NEEDED outside the string table"));
		auto name = read_string(off);
		if (!name)
			return fail(name.error());
		if (valid_soname(*name) && is_driver_library_name(*name))
			info.needed.push_back(std::move(*name));
	}
	return info;
}

}  // namespace

Result<Info> read_info(int fd, const std::string &display)
{
	struct stat st = {};
	if (::fstat(fd, &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	unsigned char ident[EI_NIDENT];
	if (static_cast<std::uint64_t>(st.st_size) < sizeof(ident))
		return fail(bad(display, "not an ELF file (too short)"));
	Reader rd(fd, display, static_cast<std::uint64_t>(st.st_size));
	if (auto r = rd.load_head(); !r)
		return fail(r.error());
	if (auto r = rd.read(ident, sizeof(ident), 0); !r)
		return fail(r.error());
	if (std::memcmp(ident, ELFMAG, SELFMAG) != 0)
		return fail(bad(display, "not an ELF file"));
	if (ident[EI_DATA] != ELFDATA2LSB && ident[EI_DATA] != ELFDATA2MSB)
		return fail(bad(display, "unknown ELF byte order"));
	// Only native byte order is parsed: NVIDIA ships little-endian drivers for every supported arch.
	if (ident[EI_DATA] != ELFDATA2LSB)
		return fail(bad(display, "big-endian ELF not supported"));
	auto size = static_cast<std::uint64_t>(st.st_size);
	if (ident[EI_CLASS] == ELFCLASS64)
		return parse<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(rd, display, size);
	if (ident[EI_CLASS] == ELFCLASS32)
		return parse<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(rd, display, size);
	return fail(bad(display, "unknown ELF class"));
}

bool is_driver_library_name(std::string_view name)
{
	if (name.starts_with("libnvidia-") || name.starts_with("libcuda"))
		return true;
	// libEGL_nvidia, libGLX_nvidia, libGLESv2_nvidia, libvdpau_nvidia: lib<api>_nvidia.so.*
	const auto so = name.find(".so");
	return name.starts_with("lib") && so != std::string_view::npos && name.substr(0, so).ends_with("_nvidia");
}

bool valid_soname(std::string_view name)
{
	return name.size() <= 255 && name != "." && name != ".." && is_plain_file_name(name);
}

std::string native_multiarch()
{
#if defined(__x86_64__) && !defined(__ILP32__)
	return multiarch_for(EM_X86_64, true);
#elif defined(__aarch64__)
	return multiarch_for(EM_AARCH64, true);
#elif defined(__i386__)
	return multiarch_for(EM_386, false);
#elif defined(__powerpc64__)
	return multiarch_for(EM_PPC64, true);
#else
	return {};
#endif
}

std::string multiarch_for(std::uint16_t machine, bool is_64bit)
{
	switch (machine) {
	case EM_X86_64:
		return is_64bit ? "x86_64-linux-gnu" : "x86_64-linux-gnux32";
	case EM_386:
		return "i386-linux-gnu";
	case EM_AARCH64:
		return "aarch64-linux-gnu";
	case EM_ARM:
		return "arm-linux-gnueabihf";
	case EM_PPC64:
		return "powerpc64le-linux-gnu";
	default:
		return {};
	}
}

}  // namespace unbounded::elf

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
