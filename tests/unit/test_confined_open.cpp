// open_confined(): openat2 and the user-space walk give the same answers (the walk is what runs
// before Linux 5.6 and under systemd's RestrictSUIDSGID=, where openat2 fails with ENOSYS).
#include "confined_open.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

using namespace unbounded;

namespace {

// What a path resolves to: the content of the file reached, "dir", or the errno name of the failure.
std::string outcome(int root, const std::string &path, Confinement c, bool follow_last = true, int flags = O_RDONLY)
{
	auto fd = open_confined(root, path, ConfinedOpen{c, flags, follow_last});
	if (!fd)
		return std::string("errno ") + std::to_string(fd.error().errnum);
	struct stat st = {};
	REQUIRE(::fstat(fd->get(), &st) == 0);
	if (S_ISDIR(st.st_mode))
		return "dir";
	if (S_ISLNK(st.st_mode))
		return "symlink";
	if (flags & O_PATH)
		return "file";
	char buf[64];
	ssize_t n = ::read(fd->get(), buf, sizeof(buf));
	return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

struct Tree {
	test::TempDir dir;
	UniqueFd root;
	Tree()
	{
		dir.write("root/etc/file", "inside");
		dir.write("outside", "OUTSIDE");
		dir.link("file", "root/etc/relative");
		dir.link("/etc/file", "root/etc/absolute");   // InRoot: the root's /etc/file
		dir.link("../../outside", "root/etc/climb");  // InRoot: clamped at the root
		dir.link("../etc/file", "root/etc/up-and-back");
		dir.link("loop-b", "root/etc/loop-a");
		dir.link("loop-a", "root/etc/loop-b");
		dir.link("missing", "root/etc/dangling");
		dir.link("/etc", "root/etclink");
		root.reset(::open((dir / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
		REQUIRE(root);
	}
};

}  // namespace

TEST_CASE("openat2 and the user-space walk agree", "[confined]")
{
	Tree t;
	struct Case {
		const char *path;
		Confinement c;
		std::string expect;
	};
	const std::string enoent = "errno " + std::to_string(ENOENT), exdev = "errno " + std::to_string(EXDEV),
			  eloop = "errno " + std::to_string(ELOOP);
	const Case cases[] = {
		{"/etc/file", Confinement::InRoot, "inside"},
		{"etc/relative", Confinement::InRoot, "inside"},
		{"/etc/absolute", Confinement::InRoot, "inside"},
		{"/etc/climb", Confinement::InRoot, enoent},  // ../../outside is /outside in the root: absent
		{"/../../outside", Confinement::InRoot, enoent},
		{"/etc/up-and-back", Confinement::InRoot, "inside"},
		{"/etclink/file", Confinement::InRoot, "inside"},
		{"/etc/loop-a", Confinement::InRoot, eloop},
		{"/etc/dangling", Confinement::InRoot, enoent},
		{"etc/relative", Confinement::Beneath, "inside"},
		{"etc/up-and-back", Confinement::Beneath, "inside"},
		{"etc/absolute", Confinement::Beneath, exdev},
		{"etc/climb", Confinement::Beneath, exdev},
		{"../outside", Confinement::Beneath, exdev},
		{"etclink/file", Confinement::Beneath, exdev},
	};
	for (bool walk : {false, true}) {
		testing::force_user_space_walk(walk);
		for (const auto &c : cases) {
			INFO((walk ? "walk: " : "openat2: ") << c.path);
			CHECK(outcome(t.root.get(), c.path, c.c) == c.expect);
		}
		// not following the last component opens the symlink itself (O_PATH), or fails (ELOOP)
		CHECK(outcome(t.root.get(), "/etc/relative", Confinement::InRoot, false, O_PATH) == "symlink");
		CHECK(outcome(t.root.get(), "/etc/relative", Confinement::InRoot, false, O_RDONLY) == eloop);
		CHECK(outcome(t.root.get(), "/etc", Confinement::InRoot, true, O_PATH) == "dir");
	}
	testing::force_user_space_walk(false);
}

TEST_CASE("a steps budget bounds the work of many opens, in both walks", "[confined]")
{
	Tree t;
	const std::string enotdir = "errno " + std::to_string(ENOTDIR);
	for (bool walk : {false, true}) {
		testing::force_user_space_walk(walk);
		INFO((walk ? "walk" : "openat2"));
		CHECK(outcome(t.root.get(), "/etc/file/below", Confinement::InRoot) == enotdir);
		CHECK(outcome(t.root.get(), "/etclink/relative/x", Confinement::InRoot) == enotdir);
		std::uint64_t steps = 1000;
		int opened = 0;
		for (int i = 0; i < 10000; i++) {
			auto fd = open_confined(t.root.get(), "/etclink/up-and-back", ConfinedOpen{Confinement::InRoot, O_PATH, true, &steps});
			if (!fd) {
				CHECK(fd.error().errnum == ETIMEDOUT);
				break;
			}
			opened++;
		}
		CHECK(steps == 0);
		CHECK(opened > 0);
		// openat2's walk is the kernel's, one step a call; the user-space walk pays per component
		// (etclink, its target etc, up-and-back, its target's three components: 6 or so)
		CHECK(opened <= (walk ? 200 : 1000));
		// a spent budget stays spent
		CHECK(open_confined(t.root.get(), "/etc/file", ConfinedOpen{Confinement::InRoot, O_PATH, true, &steps}).error().errnum == ETIMEDOUT);
	}
	testing::force_user_space_walk(false);
}
