#include "mounts.hpp"
#include "staging.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

Staging make(const test::TempDir &t, int n)
{
	std::vector<std::pair<std::string, std::string>> dirs;
	for (int i = 0; i < n; i++) {
		t.mkdir("s/" + std::to_string(i));
		dirs.emplace_back(t / ("s/" + std::to_string(i)), "/run/host-nvidia/" + std::to_string(i));
	}
	auto s = Staging::from_dirs(dirs);
	REQUIRE(s);
	return std::move(*s);
}

}  // namespace

TEST_CASE("relative and absolute symlink chains resolve inside staging", "[staging]")
{
	test::TempDir t;
	t.write("s/0/nvidia/current/libcuda.so.535.1", "ELF");
	t.link("libcuda.so.535.1", "s/0/nvidia/current/libcuda.so.1");
	t.link("/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1", "s/0/libcuda.so.1");
	t.link("../nvidia/current/./libcuda.so.1", "s/0/sub/up");
	auto s = make(t, 1);

	auto r = s.resolve(0, "libcuda.so.1");
	REQUIRE(r);
	CHECK(r->rel == "nvidia/current/libcuda.so.535.1");
	CHECK(r->display == "/run/host-nvidia/0/nvidia/current/libcuda.so.535.1");
	CHECK(S_ISREG(r->st.st_mode));

	auto up = s.resolve(0, "sub/up");
	REQUIRE(up);
	CHECK(up->rel == "nvidia/current/libcuda.so.535.1");
}

TEST_CASE("exact host prefixes from mountinfo map absolute targets across trees", "[staging]")
{
	test::TempDir t;
	t.write("s/1/nvidia-smi", "bin");
	t.link("/usr/bin/nvidia-smi", "s/0/nvidia-smi");
	auto s = make(t, 2);
	s.trees()[1].host_prefix = "/usr/bin";
	auto r = s.resolve(0, "nvidia-smi");
	REQUIRE(r);
	CHECK(r->tree == 1);
	CHECK(r->rel == "nvidia-smi");
}

TEST_CASE("a link whose target ends in its own name is looked up elsewhere, not looped", "[staging]")
{
	test::TempDir t;
	t.link("/opt/real/libx.so.1", "s/0/libx.so.1");
	t.write("s/1/real/libx.so.1", "x");
	auto s = make(t, 2);
	auto r = s.resolve(0, "libx.so.1");
	REQUIRE(r);
	CHECK(r->tree == 1);
	CHECK(r->rel == "real/libx.so.1");
}

TEST_CASE("dangling, looping and escaping links are errors naming the path", "[staging]")
{
	test::TempDir t;
	t.link("missing.so", "s/0/dangling");
	t.link("b", "s/0/a");
	t.link("a", "s/0/b");
	t.link("/etc/passwd-nonexistent-xyz", "s/0/outside");
	t.link("../../../../../../../../etc/hostname", "s/0/escape");
	t.write("s/0/file", "x");
	t.link("file/below", "s/0/notdir");
	auto s = make(t, 1);

	auto d = s.resolve(0, "dangling");
	REQUIRE_FALSE(d);
	CHECK(d.error().errnum == ENOENT);
	CHECK_THAT(d.error().message, Catch::Contains("/run/host-nvidia/0/dangling") && Catch::Contains("dangling"));

	auto l = s.resolve(0, "a");
	REQUIRE_FALSE(l);
	CHECK(l.error().errnum == ELOOP);

	auto o = s.resolve(0, "outside");
	REQUIRE_FALSE(o);
	CHECK_THAT(o.error().message, Catch::Contains("outside the staging mounts"));

	// ".." stops at the tree root, so this looks for <tree>/etc/hostname, which does not exist.
	auto e = s.resolve(0, "escape");
	REQUIRE_FALSE(e);
	CHECK(e.error().errnum == ENOENT);

	auto n = s.resolve(0, "notdir");
	REQUIRE_FALSE(n);
	CHECK(n.error().errnum == ENOTDIR);
}

TEST_CASE("listing a missing directory is empty, not an error", "[staging]")
{
	test::TempDir t;
	t.write("s/0/a", "");
	auto s = make(t, 1);
	auto l = s.list(0, "nvidia/current");
	REQUIRE(l);
	CHECK(l->empty());
	auto top = s.list(0, "");
	REQUIRE(top);
	CHECK(*top == std::vector<std::string>{"a"});
}

TEST_CASE("the mount table keeps the staging mount points only, as the kernel escapes them", "[staging]")
{
	test::TempDir t;
	std::string info;
	info += "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n";
	info += "30 22 0:30 /usr/lib/x86_64-linux-gnu /run/host-nvidia/0 ro,nosuid - ext4 /dev/vda1 ro\n";
	info += "31 22 0:31 / /run/host-nvidia/0/nested ro - tmpfs tmpfs ro\n";  // not a direct child
	info += "32 22 0:32 /a\\040b /run/host-nvidia/with\\040space ro - ext4 /dev/vda1 ro\n";
	info += "33 22 0:33 / /run/host-nvidia-other/1 ro - tmpfs tmpfs ro\n";          // a sibling prefix
	info += "34 22 0:34 / /run/host-nvidia ro - tmpfs tmpfs ro\n";                  // the parent itself
	info += "35 22 0:35 /x " + std::string(20000, 'a') + " ro - tmpfs tmpfs ro\n";  // too long: skipped
	info += "36 30 0:36 /later /run/host-nvidia/0 ro - xfs /dev/vdb ro\n";          // shadows 30
	for (int i = 0; i < 20000; i++)
		info += std::to_string(100 + i) + " 22 0:99 / /var/lib/kubelet/pods/p" + std::to_string(i) + "/volume rw - tmpfs tmpfs rw\n";
	t.write("mountinfo", info);

	auto table = MountTable::load("/run/host-nvidia/", t / "mountinfo");
	REQUIRE(table);
	auto zero = table->mount_at("/run/host-nvidia/0");
	REQUIRE(zero);
	CHECK(zero->root == "/later");
	CHECK(zero->fstype == "xfs");
	auto spaced = table->mount_at("/run/host-nvidia/with space");
	REQUIRE(spaced);
	CHECK(spaced->root == "/a b");
	CHECK_FALSE(table->mount_at("/run/host-nvidia/0/nested"));
	CHECK_FALSE(table->mount_at("/run/host-nvidia-other/1"));
	CHECK_FALSE(table->mount_at("/run/host-nvidia"));
	CHECK_FALSE(table->mount_at("/var/lib/kubelet/pods/p7/volume"));

	auto missing = MountTable::load("/run/host-nvidia", t / "nope");
	REQUIRE_FALSE(missing);
	CHECK_THAT(missing.error().message, Catch::Contains(t / "nope"));
}
