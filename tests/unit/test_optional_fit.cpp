// leave_out_what_does_not_fit: optional files leave the plan when their copies would
// not leave room; required ones never; a file the live root already has costs nothing.
#include "optional_fit.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

constexpr std::uint64_t MiB = 1u << 20;
const std::string ROOT = "/run/nvidia/driver";
const Reusable NONE = [](const ManifestEntry &) { return false; };

DriverFile file(FileKind kind, const std::string &dest)
{
	DriverFile f;
	f.kind = kind;
	f.dest = dest;
	return f;
}

ManifestEntry entry(const std::string &path, std::uint64_t size)
{
	ManifestEntry e;
	e.path = path;
	e.size = size;
	e.source = "/run/host-nvidia/0/" + path;
	e.source_id = "1:" + path;
	return e;
}

struct Machine {
	DriverSet driver;
	Manifest plan;
	void add(FileKind kind, const std::string &path, std::uint64_t size)
	{
		driver.files.push_back(file(kind, path));
		plan.entries.push_back(entry(path, size));
	}
	std::vector<std::string> paths() const
	{
		std::vector<std::string> out;
		for (const auto &e : plan.entries)
			out.push_back(e.path);
		return out;
	}
};

Machine staged_machine()
{
	Machine m;
	m.add(FileKind::Library, "lib/x86_64-linux-gnu/libcuda.so.535.104.05", 1 * MiB);
	m.add(FileKind::Data, "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll", 9 * MiB);
	m.add(FileKind::Data, "usr/share/nvidia/nvoptix.bin", 9 * MiB);
	return m;
}

}  // namespace

TEST_CASE("optional files that fit stay, in the plan's order, and the rest is said")
{
	Machine m = staged_machine();
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, NONE, FreeSpace{16 * MiB, 16 * MiB, 4096, "/run/nvidia"}, ROOT);
	REQUIRE(left.size() == 1);
	CHECK(left[0].path == "usr/share/nvidia/nvoptix.bin");
	CHECK(left[0].warning.find("Leaving out /run/nvidia/driver/usr/share/nvidia/nvoptix.bin (") == 0);
	CHECK(left[0].warning.find("not enough space in /run/nvidia (16.0 MiB free") != std::string::npos);
	CHECK(m.paths() == std::vector<std::string>{"lib/x86_64-linux-gnu/libcuda.so.535.104.05",
						    "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll"});
}

TEST_CASE("required files are never left out, even when nothing fits")
{
	Machine m = staged_machine();
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, NONE, FreeSpace{0, 16 * MiB, 4096, "/run/nvidia"}, ROOT);
	CHECK(left.size() == 2);
	CHECK(m.paths() == std::vector<std::string>{"lib/x86_64-linux-gnu/libcuda.so.535.104.05"});
}

TEST_CASE("a file the live root can lend costs nothing, and leaves room for those that cost")
{
	Machine m = staged_machine();
	// 7 MiB free: nvngx.dll is reused (a hard link), so it stays; nvoptix.bin's 9 MiB do not fit with
	// 4 MiB kept, although it comes later in the plan than a file that costs.
	auto dll = [](const ManifestEntry &e) { return e.path == "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll"; };
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, dll, FreeSpace{7 * MiB, 16 * MiB, 4096, "/run/nvidia"}, ROOT);
	REQUIRE(left.size() == 1);
	CHECK(left[0].path == "usr/share/nvidia/nvoptix.bin");
	// 14 MiB free, nvoptix.bin reused: nvngx.dll's 9 MiB fit beside libcuda's 1 MiB with 4 MiB kept.
	Machine n = staged_machine();
	auto optix = [](const ManifestEntry &e) { return e.path == "usr/share/nvidia/nvoptix.bin"; };
	CHECK(leave_out_what_does_not_fit(n.plan, n.driver, optix, FreeSpace{14 * MiB, 16 * MiB, 4096, "/run/nvidia"}, ROOT).empty());
	// Without the reuse neither fits there.
	Machine o = staged_machine();
	CHECK(leave_out_what_does_not_fit(o.plan, o.driver, NONE, FreeSpace{7 * MiB, 16 * MiB, 4096, "/run/nvidia"}, ROOT).size() == 2);
}

TEST_CASE("a file takes whole blocks")
{
	Machine m;
	m.add(FileKind::Library, "lib/x86_64-linux-gnu/libcuda.so.535.104.05", 1);
	m.add(FileKind::Data, "usr/share/nvidia/nvoptix.bin", 1);
	CHECK(bytes_without_reuse(m.plan, 4096) == 8192);
	// 4 MiB kept and two bytes in two blocks: one block short.
	const std::uint64_t reserve = space_reserve(16 * MiB);
	CHECK(leave_out_what_does_not_fit(m.plan, m.driver, NONE, FreeSpace{reserve + 8191, 16 * MiB, 4096, "/run"}, ROOT).size() == 1);
	Machine n;
	n.add(FileKind::Library, "lib/x86_64-linux-gnu/libcuda.so.535.104.05", 1);
	n.add(FileKind::Data, "usr/share/nvidia/nvoptix.bin", 1);
	CHECK(leave_out_what_does_not_fit(n.plan, n.driver, NONE, FreeSpace{reserve + 8192, 16 * MiB, 4096, "/run"}, ROOT).empty());
}

TEST_CASE("after ENOSPC every optional copy goes, the linked ones stay")
{
	Machine m = staged_machine();
	auto dll = [](const ManifestEntry &e) { return e.path == "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll"; };
	auto left = leave_out_all_copied(m.plan, m.driver, dll, ROOT, "Failed to copy x: No space left on device");
	REQUIRE(left.size() == 1);
	CHECK(left[0].path == "usr/share/nvidia/nvoptix.bin");
	CHECK(left[0].warning.find("No space left on device") != std::string::npos);
	CHECK(m.paths() == std::vector<std::string>{"lib/x86_64-linux-gnu/libcuda.so.535.104.05",
						    "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll"});
}

TEST_CASE("the reserve is a twentieth of the file system, at least 4 MiB")
{
	CHECK(space_reserve(16 * MiB) == 4 * MiB);
	CHECK(space_reserve(1000 * MiB) == 50 * MiB);
	CHECK(space_reserve(std::uint64_t(1) << 40) == 256 * MiB);  // a large disk keeps no gigabytes idle
	Machine m = staged_machine();
	// Exactly enough for everything with the reserve: nothing is left out.
	const std::uint64_t all = 19 * MiB + space_reserve(64 * MiB);
	CHECK(leave_out_what_does_not_fit(m.plan, m.driver, NONE, FreeSpace{all, 64 * MiB, 4096, "/run"}, ROOT).empty());
	Machine n = staged_machine();
	CHECK(leave_out_what_does_not_fit(n.plan, n.driver, NONE, FreeSpace{all - 1, 64 * MiB, 4096, "/run"}, ROOT).size() == 1);
}
