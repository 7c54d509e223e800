#include "elf.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>

using namespace unbounded;

static std::string fixture_path(const std::string &name)
{
	const char *d = std::getenv("FIXTURE_DIR");
	REQUIRE(d != nullptr);
	return std::string(d) + "/" + name;
}

static Result<elf::Info> info_of(const std::string &path)
{
	UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
	REQUIRE(fd.valid());
	return elf::read_info(fd.get(), path);
}

TEST_CASE("DT_SONAME is read from compiled fixture libraries", "[elf]")
{
	auto i = info_of(fixture_path("libcuda.so.535.104.05"));
	REQUIRE(i);
	CHECK(i->soname == "libcuda.so.1");
	CHECK(i->is_64bit);
	CHECK_FALSE(elf::multiarch_for(i->machine, i->is_64bit).empty());

	auto own = info_of(fixture_path("libnvidia-glcore.so.535.104.05"));
	REQUIRE(own);
	CHECK(own->soname == "libnvidia-glcore.so.535.104.05");

	auto exe = info_of(fixture_path("nvidia-smi-535.104.05"));
	REQUIRE(exe);
	CHECK_FALSE(exe->soname.has_value());
}

TEST_CASE("broken ELF files are errors naming the file", "[elf]")
{
	test::TempDir t;
	std::ifstream in(fixture_path("libcuda.so.535.104.05"), std::ios::binary);
	std::stringstream ss;
	ss << in.rdbuf();
	const std::string lib = ss.str();

	t.write("empty", "");
	t.write("text", "#!/bin/sh\necho not an elf file at all\n");
	t.write("header-only", lib.substr(0, 64));
	t.write("half", lib.substr(0, lib.size() / 2));
	for (const char *name : {"empty", "text", "header-only", "half"}) {
		INFO(name);
		auto r = info_of(t / name);
		if (std::string(name) == "half" && r) {
			// Cutting in half may keep the dynamic segment whole: then the SONAME must still be right.
			CHECK(r->soname == "libcuda.so.1");
			continue;
		}
		REQUIRE_FALSE(r);
		CHECK_THAT(r.error().message, Catch::Contains(t / name));
	}
}

TEST_CASE("ELF machines map to Debian multiarch tuples", "[elf]")
{
	CHECK(elf::multiarch_for(EM_X86_64, true) == "x86_64-linux-gnu");
	CHECK(elf::multiarch_for(EM_AARCH64, true) == "aarch64-linux-gnu");
	CHECK(elf::multiarch_for(EM_386, false) == "i386-linux-gnu");
	CHECK(elf::multiarch_for(EM_SPARC, false).empty());
}

TEST_CASE("offsets near 2^64 are truncation, not a wrapped bound and a failed pread", "[elf]")
{
	test::TempDir t;
	std::ifstream in(fixture_path("libcuda.so.535.104.05"), std::ios::binary);
	std::stringstream ss;
	ss << in.rdbuf();
	std::string lib = ss.str();
	REQUIRE(lib.size() > sizeof(Elf64_Ehdr));
	Elf64_Ehdr eh;
	std::memcpy(&eh, lib.data(), sizeof(eh));
	// e_phoff + e_phnum * e_phentsize wraps to a small number: the old check passed and pread failed
	// with EINVAL ("Invalid argument"), which names no cause.
	eh.e_phoff = ~std::uint64_t(0) - std::uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr) + 2;
	std::string bad = lib;
	std::memcpy(bad.data(), &eh, sizeof(eh));
	t.write("phoff-wraps", bad);
	auto r = info_of(t / "phoff-wraps");
	REQUIRE_FALSE(r);
	CHECK_THAT(r.error().message, Catch::Contains("truncated ELF file (program headers)"));
}
