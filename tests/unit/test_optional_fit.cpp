// leave_out_what_does_not_fit (issue 34, item 12): optional files leave the plan when their copies would
// not leave room; required ones never; a file the live root already has costs nothing.
#include "optional_fit.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

constexpr std::uint64_t MiB = 1u << 20;

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

Machine machine()
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
	Machine m = machine();
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, nullptr, FreeSpace{16 * MiB, 16 * MiB, 4096, "/run/nvidia"});
	REQUIRE(left.size() == 1);
	CHECK(left[0].path == "usr/share/nvidia/nvoptix.bin");
	CHECK(left[0].warning.find("not enough space in /run/nvidia") != std::string::npos);
	CHECK(left[0].warning.find('\n') == std::string::npos);
	CHECK(m.paths() == std::vector<std::string>{"lib/x86_64-linux-gnu/libcuda.so.535.104.05",
						    "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll"});
}

TEST_CASE("required files are never left out, even when nothing fits")
{
	Machine m = machine();
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, nullptr, FreeSpace{0, 16 * MiB, 4096, "/run/nvidia"});
	CHECK(left.size() == 2);
	CHECK(m.paths() == std::vector<std::string>{"lib/x86_64-linux-gnu/libcuda.so.535.104.05"});
}

TEST_CASE("a file the live root has costs nothing, and goes before those that cost")
{
	Machine m = machine();
	Manifest live;
	live.entries.push_back(entry("usr/share/nvidia/nvoptix.bin", 9 * MiB));
	// 7 MiB free: nvoptix.bin is reused (a hard link), nvngx.dll's 9 MiB do not fit with 4 MiB kept.
	auto left = leave_out_what_does_not_fit(m.plan, m.driver, &live, FreeSpace{7 * MiB, 16 * MiB, 4096, "/run/nvidia"});
	REQUIRE(left.size() == 1);
	CHECK(left[0].path == "lib/x86_64-linux-gnu/nvidia/wine/nvngx.dll");
	// A live entry from another source is no reuse.
	Machine n = machine();
	live.entries[0].source_id = "2:other";
	CHECK(leave_out_what_does_not_fit(n.plan, n.driver, &live, FreeSpace{7 * MiB, 16 * MiB, 4096, "/run/nvidia"}).size() == 2);
}

TEST_CASE("the reserve is a twentieth of the file system, at least 4 MiB")
{
	CHECK(space_reserve(16 * MiB) == 4 * MiB);
	CHECK(space_reserve(1000 * MiB) == 50 * MiB);
	Machine m = machine();
	// Exactly enough for everything with the reserve: nothing is left out.
	const std::uint64_t all = 19 * MiB + space_reserve(64 * MiB);
	CHECK(leave_out_what_does_not_fit(m.plan, m.driver, nullptr, FreeSpace{all, 64 * MiB, 4096, "/run"}).empty());
	CHECK(leave_out_what_does_not_fit(m.plan, m.driver, nullptr, FreeSpace{all - 1, 64 * MiB, 4096, "/run"}).size() == 1);
}
