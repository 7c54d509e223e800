#include "driver_discovery.hpp"
#include "format.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("driver versions are recognised in library names", "[discovery]")
{
	CHECK(version_suffix("libcuda.so.535.104.05", "libcuda.so.") == "535.104.05");
	CHECK(version_suffix("libcuda.so.390.157", "libcuda.so.") == "390.157");
	CHECK_FALSE(version_suffix("libcuda.so.12.2", "libcuda.so."));
	CHECK(is_library_version("1.1.9"));
	CHECK(could_be_driver_file("libEGL_nvidia.so.535.104.05"));
	CHECK(could_be_driver_file("libnvidia-egl-wayland.so.1.1.9"));
	CHECK(could_be_driver_file("nvidia-smi"));
	CHECK_FALSE(could_be_driver_file("libz.so.1.2.13"));
	CHECK_FALSE(could_be_driver_file("libnvidia-egl-wayland.so.1"));
	CHECK_FALSE(version_suffix("libcuda.so.1", "libcuda.so."));
	CHECK_FALSE(version_suffix("libcuda.so", "libcuda.so."));
	CHECK_FALSE(version_suffix("libcuda.so.535.104.05.bak", "libcuda.so."));
	CHECK_FALSE(version_suffix("libcuda.so.535..05", "libcuda.so."));
	CHECK_FALSE(version_suffix("libcudart.so.12.2.1", "libcuda.so."));
	CHECK(is_driver_version("570.86.10"));
	CHECK_FALSE(is_driver_version("1.2.3.4"));
}

TEST_CASE("kernel module versions are read from both proc formats", "[discovery]")
{
	CHECK(parse_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
				 "GCC version:  gcc version 12.2.0\n") == "535.104.05");
	CHECK(parse_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.10  Release Build  "
				 "(dvs-builder@U16)  Wed Jan 22 2025\n") == "570.86.10");
	CHECK(parse_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build\n") ==
	      "580.65.06");
	CHECK_FALSE(parse_proc_version(""));
	CHECK_FALSE(parse_proc_version("garbage\n"));
	CHECK_FALSE(parse_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  unknown\n"));
}

TEST_CASE("versions compare numerically", "[discovery]")
{
	CHECK(compare_versions("1.1.9", "1.1.10") < 0);
	CHECK(compare_versions("550.54.15", "535.104.05") > 0);
	CHECK(compare_versions("1.0", "1.0") == 0);
}

TEST_CASE("numeric names sort in numeric order, before other names", "[format]")
{
	CHECK(numeric_name_less("2", "10"));
	CHECK_FALSE(numeric_name_less("10", "2"));
	CHECK(numeric_name_less("9", "10"));
	CHECK(numeric_name_less("10", "GPU-00000000-1111-2222-3333-444455556666"));
	CHECK(numeric_name_less("GPU-0", "all"));
	CHECK_FALSE(numeric_name_less("7", "7"));
	CHECK(numeric_name_less("99999999999999999999", "100000000000000000000"));  // no overflow
	CHECK(all_digits("0123"));
	CHECK_FALSE(all_digits(""));
	CHECK_FALSE(all_digits("12a"));
}

TEST_CASE("concat joins its parts in order, empty parts included", "[format]")
{
	const std::string version = "550.54.15";
	CHECK(concat({"a file of driver ", version, " (", "", "), not ", std::string_view("535")}) == "a file of driver 550.54.15 (), not 535");
	CHECK(concat({}).empty());
}
