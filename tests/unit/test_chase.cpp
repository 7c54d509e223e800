// chase(): the one path resolver, flag by flag, and the two helpers that came with it
// (fs::read_link_at, fs::read_trusted_at).
#include "chase.hpp"
#include "fs.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace unbounded;

namespace {

struct Tree {
	test::TempDir dir;
	UniqueFd root;
	Tree()
	{
		dir.write("root/etc/file", "inside");
		dir.write("root/lib/libcuda.so.535", "elf");
		dir.write("outside", "OUTSIDE");
		dir.link("libcuda.so.535", "root/lib/libcuda.so.1");  // relative, inside
		dir.link("/etc/file", "root/etc/absolute");           // absolute: the root's /etc/file, or an escape
		dir.link("../../outside", "root/etc/climb");          // ".." above the root
		dir.link("missing", "root/etc/dangling");
		dir.link("loop-b", "root/etc/loop-a");
		dir.link("loop-a", "root/etc/loop-b");
		dir.link("../lib", "root/etc/libdir");  // a symlink in the middle of a path
		root.reset(::open((dir / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
		REQUIRE(root);
	}
};

std::string content(const Chased &c)
{
	UniqueFd fd(::openat(c.dir.get(), c.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
	REQUIRE(fd);
	char buf[64];
	const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
	return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

}  // namespace

TEST_CASE("chase: a plain path and a relative symlink give the canonical path, its directory and name", "[chase]")
{
	Tree t;
	auto c = chase(t.root.get(), "/lib/libcuda.so.1");
	REQUIRE(c);
	CHECK(c->rel == "lib/libcuda.so.535");
	CHECK(c->name == "libcuda.so.535");
	CHECK(c->symlinks == 1);
	CHECK(S_ISREG(c->st.st_mode));
	CHECK_FALSE(c->fd);  // only with OpenLast
	CHECK(content(*c) == "elf");

	auto d = chase(t.root.get(), "etc/libdir/libcuda.so.535", ChaseHow{Chase::OpenLast, nullptr, {}});
	REQUIRE(d);
	CHECK(d->rel == "lib/libcuda.so.535");
	REQUIRE(d->fd);
	struct stat st = {};
	REQUIRE(::fstat(d->fd.get(), &st) == 0);
	CHECK(st.st_ino == d->st.st_ino);

	auto root = chase(t.root.get(), "etc/..");
	REQUIRE(root);
	CHECK(root->name.empty());
	CHECK(root->rel.empty());
}

TEST_CASE("chase: an absolute symlink stays in the root, or is refused beneath it", "[chase]")
{
	Tree t;
	auto in = chase(t.root.get(), "etc/absolute");
	REQUIRE(in);
	CHECK(in->rel == "etc/file");
	CHECK(content(*in) == "inside");

	auto beneath = chase(t.root.get(), "etc/absolute", ChaseHow{Chase::Beneath, nullptr, {}});
	REQUIRE_FALSE(beneath);
	CHECK(beneath.error().errnum == EXDEV);
	CHECK(beneath.error().step == ChaseStep::Escape);
	CHECK(beneath.error().at == "etc/absolute");
}

TEST_CASE("chase: '..' above the root stops at it, or is refused beneath it", "[chase]")
{
	Tree t;
	// ../../outside from etc/: clamped at the root, it names <root>/outside, which does not exist
	auto in = chase(t.root.get(), "etc/climb");
	REQUIRE_FALSE(in);
	CHECK(in.error().errnum == ENOENT);
	CHECK(in.error().at == "outside");
	auto direct = chase(t.root.get(), "../../etc/file");
	REQUIRE(direct);
	CHECK(direct->rel == "etc/file");

	for (const char *path : {"etc/climb", "../etc/file", "etc/../../etc/file"}) {
		INFO(path);
		auto b = chase(t.root.get(), path, ChaseHow{Chase::Beneath, nullptr, {}});
		REQUIRE_FALSE(b);
		CHECK(b.error().errnum == EXDEV);
		CHECK(b.error().step == ChaseStep::Escape);
	}
	// ".." that stays inside is fine beneath the root too
	auto inside = chase(t.root.get(), "etc/../lib/libcuda.so.535", ChaseHow{Chase::Beneath, nullptr, {}});
	REQUIRE(inside);
	CHECK(inside->rel == "lib/libcuda.so.535");
}

TEST_CASE("chase: a dangling symlink fails with ENOENT naming the missing target", "[chase]")
{
	Tree t;
	auto c = chase(t.root.get(), "etc/dangling");
	REQUIRE_FALSE(c);
	CHECK(c.error().errnum == ENOENT);
	CHECK(c.error().step == ChaseStep::Walk);
	CHECK(c.error().at == "etc/missing");
	CHECK(c.error().symlinks == 1);
	CHECK_THAT(c.error().error.message, Catch::Contains("Failed to resolve etc/dangling"));
	// Not followed, the link itself is the answer.
	auto nofollow = chase(t.root.get(), "etc/dangling", ChaseHow{Chase::NoFollow, nullptr, {}});
	REQUIRE(nofollow);
	CHECK(S_ISLNK(nofollow->st.st_mode));
	CHECK(nofollow->rel == "etc/dangling");
}

TEST_CASE("chase: a symlink loop fails with ELOOP after the kernel's 40 links", "[chase]")
{
	Tree t;
	auto c = chase(t.root.get(), "etc/loop-a");
	REQUIRE_FALSE(c);
	CHECK(c.error().errnum == ELOOP);
	CHECK(c.error().step == ChaseStep::Loop);
	CHECK(c.error().symlinks == CHASE_MAX_SYMLINKS);
}

TEST_CASE("chase: NoSymlinks refuses every symlink on the way, not a last one left unfollowed", "[chase]")
{
	Tree t;
	const ChaseHow plain{Chase::Beneath | Chase::NoSymlinks, nullptr, {}};
	auto middle = chase(t.root.get(), "etc/libdir/libcuda.so.535", plain);
	REQUIRE_FALSE(middle);
	CHECK(middle.error().errnum == ELOOP);
	CHECK(middle.error().step == ChaseStep::Loop);
	CHECK(middle.error().symlinks == 0);
	auto last = chase(t.root.get(), "lib/libcuda.so.1", plain);
	REQUIRE_FALSE(last);
	CHECK(last.error().errnum == ELOOP);
	auto unfollowed = chase(t.root.get(), "lib/libcuda.so.1", ChaseHow{Chase::NoSymlinks | Chase::NoFollow, nullptr, {}});
	REQUIRE(unfollowed);
	CHECK(S_ISLNK(unfollowed->st.st_mode));
	CHECK(chase(t.root.get(), "lib/libcuda.so.535", plain));
}

TEST_CASE("chase: a file in the middle of a path is ENOTDIR", "[chase]")
{
	Tree t;
	auto c = chase(t.root.get(), "etc/file/below");
	REQUIRE_FALSE(c);
	CHECK(c.error().errnum == ENOTDIR);
	CHECK(c.error().step == ChaseStep::NotDir);
	CHECK(c.error().at == "etc/file");
}

TEST_CASE("chase: the steps budget is shared and spent with ETIMEDOUT", "[chase]")
{
	Tree t;
	std::uint64_t steps = 3;  // "lib", "libcuda.so.1", then the link's one component
	REQUIRE(chase(t.root.get(), "lib/libcuda.so.1", ChaseHow{Chase::InRoot, &steps, {}}));
	CHECK(steps == 0);
	auto spent = chase(t.root.get(), "lib", ChaseHow{Chase::InRoot, &steps, {}});
	REQUIRE_FALSE(spent);
	CHECK(spent.error().errnum == ETIMEDOUT);
	CHECK(spent.error().step == ChaseStep::Budget);
}

TEST_CASE("chase: on_symlink sees every link, can move the walk to another root or fail it", "[chase]")
{
	Tree t;
	t.dir.write("other/nvidia/libcuda.so.535", "other");
	t.dir.link("/usr/lib/nvidia/libcuda.so.535", "root/lib/host");
	UniqueFd other(::open((t.dir / "other").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	REQUIRE(other);
	std::vector<std::string> seen;
	ChaseHow how;
	how.on_symlink = [&](const std::string &link, const std::string &target) -> Result<std::optional<ChaseJump>> {
		seen.push_back(link + " -> " + target);
		if (target.starts_with("/usr/lib/"))
			return ChaseJump{other.get(), target.substr(9)};
		return std::nullopt;
	};
	auto c = chase(t.root.get(), "etc/libdir/host", how);
	REQUIRE(c);
	CHECK(c->rel == "nvidia/libcuda.so.535");
	CHECK(content(*c) == "other");
	CHECK(seen == std::vector<std::string>{"etc/libdir -> ../lib", "lib/host -> /usr/lib/nvidia/libcuda.so.535"});

	how.on_symlink = [](const std::string &, const std::string &) -> Result<std::optional<ChaseJump>> {
		return fail(make_error("not mapped", EXIT_NOT_READY, ENOENT));
	};
	auto f = chase(t.root.get(), "lib/host", how);
	REQUIRE_FALSE(f);
	CHECK(f.error().step == ChaseStep::Hook);
	CHECK(f.error().error.message == "not mapped");
}

TEST_CASE("read_link_at reads a target whole and fails on what is no symlink", "[chase]")
{
	Tree t;
	UniqueFd etc(::open((t.dir / "root/etc").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	REQUIRE(etc);
	CHECK(fs::read_link_at(etc.get(), "climb").value_or("") == "../../outside");
	const std::string long_target(4095, 'x');  // the longest the kernel stores
	t.dir.link(long_target, "root/etc/long");
	CHECK(fs::read_link_at(etc.get(), "long").value_or("") == long_target);
	auto file = fs::read_link_at(etc.get(), "file", "/etc/file");
	REQUIRE_FALSE(file);
	CHECK(file.error().errnum == EINVAL);
	CHECK_THAT(file.error().message, Catch::StartsWith("Failed to read symlink /etc/file"));
}

TEST_CASE("read_trusted_at says which check failed", "[chase]")
{
	test::TempDir t;
	t.write("run/memo", "ours", 0644);
	t.write("run/big", std::string(100, 'x'), 0644);
	t.write("run/writable", "forged", 0666);
	t.link("memo", "run/link");
	REQUIRE(::mkfifo((t / "run/fifo").c_str(), 0644) == 0);
	REQUIRE(::chmod((t / "run").c_str(), 0755) == 0);
	UniqueFd dir(::open((t / "run").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	REQUIRE(dir);
	auto step = [&](const char *name, std::size_t cap = 64) {
		auto r = fs::read_trusted_at(dir.get(), "run", name, name, cap);
		return r ? -1 : static_cast<int>(r.error().step);
	};
	auto ok = fs::read_trusted_at(dir.get(), "run", "memo", "memo", 64);
	REQUIRE(ok);
	CHECK(ok->text == "ours");
	CHECK(ok->fd);
	CHECK(step("missing") == static_cast<int>(fs::TrustedStep::Open));
	CHECK(step("link") == static_cast<int>(fs::TrustedStep::Open));
	CHECK(step("fifo") == static_cast<int>(fs::TrustedStep::Open));  // refused, not waited on
	CHECK(step("writable") == static_cast<int>(fs::TrustedStep::File));
	CHECK(step("big", 99) == static_cast<int>(fs::TrustedStep::Read));
	CHECK(step("big", 100) == -1);

	REQUIRE(::chmod((t / "run").c_str(), 0777) == 0);
	CHECK(step("memo") == static_cast<int>(fs::TrustedStep::Directory));
	CHECK(fs::read_trusted_at(dir.get(), "", "memo", "memo", 64));  // the caller vouches for the directory
	REQUIRE(::chmod((t / "run").c_str(), 0755) == 0);
}
