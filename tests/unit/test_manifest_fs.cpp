#include "context.hpp"
#include "fs.hpp"
#include "manifest.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

using namespace unbounded;

TEST_CASE("manifests round-trip byte for byte", "[manifest]")
{
	Manifest m;
	m.driver_version = "535.104.05";
	m.multiarch = "x86_64-linux-gnu";
	ManifestEntry f;
	f.path = "bin/nvidia-smi";
	f.mode = 0755;
	f.size = 42;
	f.mtime_ns = 1700000000123456789;
	f.source = "/run/host-nvidia/1/nvidia-smi";
	f.source_id = "64768:1234";
	ManifestEntry l;
	l.type = ManifestEntry::Type::Link;
	l.path = "lib/x86_64-linux-gnu/libcuda.so";
	l.target = "libcuda.so.1";
	m.entries = {f, l};
	const std::string text = m.to_json();
	auto back = Manifest::from_json(text, "m");
	REQUIRE(back);
	CHECK(back->to_json() == text);
	REQUIRE(back->find("bin/nvidia-smi"));
	CHECK(back->find("bin/nvidia-smi")->mode == 0755);
	CHECK(back->find("nope") == nullptr);
}

TEST_CASE("malformed manifests are rejected, never crash", "[manifest]")
{
	for (const char *bad : {"", "{", "[]", "{\"format\":2}", "{\"format\":1,\"driver_version\":1}",
				"{\"format\":1,\"driver_version\":\"1\",\"multiarch\":\"x\",\"entries\":[{\"path\":\"../x\",\"type\":\"link\",\"target\":\"y\"}]}",
				"{\"format\":1,\"driver_version\":\"1\",\"multiarch\":\"x\",\"entries\":[{\"path\":\"x\",\"type\":\"fifo\"}]}",
				"{\"format\":1,\"driver_version\":\"1\",\"multiarch\":\"x\",\"entries\":[{\"path\":\"b\",\"type\":\"link\",\"target\":\"y\"},{\"path\":\"a\",\"type\":\"link\",\"target\":\"y\"}]}"}) {
		INFO(bad);
		auto r = Manifest::from_json(bad, "m");
		REQUIRE_FALSE(r);
		CHECK_THAT(r.error().message, Catch::StartsWith("Invalid manifest m"));
	}
}

TEST_CASE("path helpers", "[fs]")
{
	CHECK(fs::root_path("", "/run/x") == "/run/x");
	CHECK(fs::root_path("/tmp/r/", "/run/x") == "/tmp/r/run/x");
	CHECK(fs::dirname("/run/nvidia/driver") == "/run/nvidia");
	CHECK(fs::dirname("driver") == ".");
	CHECK(fs::basename("/run/nvidia/driver/") == "driver");
	CHECK(fs::join("a", "b") == "a/b");
	CHECK(fs::join("", "b") == "b");
	CHECK(fs::random_suffix().size() == 6);
}

TEST_CASE("a root however written: \"/\" in any spelling is this system", "[context]")
{
	// Before, only the literal "/" was: "//" or "/./" took the live system for a fake root, with no
	// service manager to restart nvidia-gridd with.
	const char *saved = std::getenv("UNBOUNDED_NVIDIA_ROOT");
	const std::optional<std::string> before = saved ? std::optional<std::string>(saved) : std::nullopt;
	::unsetenv("UNBOUNDED_NVIDIA_ROOT");
	for (const char *live : {"", "/", "//", "/./", "/.//.", "/..", "/../."})
		CHECK(effective_root(live).empty());
	CHECK(effective_root("/../tmp/r") == "/tmp/r");
	CHECK(effective_root("/tmp/r/") == "/tmp/r");
	CHECK(effective_root("/tmp//r/./x") == "/tmp/r/x");
	CHECK(effective_root("/tmp/a/../b") == "/tmp/a/../b");  // the kernel's to resolve, after any symlink
	CHECK(effective_root("build/root/") == "build/root");
	CHECK(effective_root("./") == ".");
	::setenv("UNBOUNDED_NVIDIA_ROOT", "/srv/m//", 1);
	CHECK(effective_root("") == "/srv/m");
	CHECK(effective_root("/other") == "/other");  // the flag wins
	::setenv("UNBOUNDED_NVIDIA_ROOT", "//", 1);
	CHECK(effective_root("").empty());
	if (before)
		::setenv("UNBOUNDED_NVIDIA_ROOT", before->c_str(), 1);
	else
		::unsetenv("UNBOUNDED_NVIDIA_ROOT");
}

TEST_CASE("atomic writes replace whole files and skip identical content", "[fs]")
{
	test::TempDir t;
	const std::string p = t / "spec.yaml";
	auto w1 = fs::write_file_atomic(p, "one\n");
	REQUIRE(w1);
	CHECK(*w1 == fs::WriteOutcome::Written);
	struct stat st1 = {};
	REQUIRE(::stat(p.c_str(), &st1) == 0);
	CHECK((st1.st_mode & 07777) == 0644);
	auto w2 = fs::write_file_atomic(p, "one\n");
	REQUIRE(w2);
	CHECK(*w2 == fs::WriteOutcome::Unchanged);
	struct stat st2 = {};
	REQUIRE(::stat(p.c_str(), &st2) == 0);
	CHECK(st1.st_ino == st2.st_ino);
	auto w3 = fs::write_file_atomic(p, "two\n");
	REQUIRE(w3);
	CHECK(*w3 == fs::WriteOutcome::Written);
	CHECK(fs::read_file(p).value() == "two\n");
	auto dir = fs::open_dir(t.path());
	REQUIRE(dir);
	CHECK(fs::list_dir(dir->get(), t.path()).value() == std::vector<std::string>{"spec.yaml"});

	// A temp file of a writer killed before its rename goes, even when the content is unchanged
	// (the killed writer may have been writing the bytes that are in place now).
	t.write(".spec.yaml.tmp-Ab12Cd", "two\n");
	REQUIRE(*fs::write_file_atomic(p, "two\n") == fs::WriteOutcome::Unchanged);
	CHECK(fs::list_dir(dir->get(), t.path()).value() == std::vector<std::string>{"spec.yaml"});

	auto missing_dir = fs::write_file_atomic(t / "nope/spec.yaml", "x");
	REQUIRE_FALSE(missing_dir);
	CHECK_THAT(missing_dir.error().message, Catch::Contains(t / "nope"));
}

TEST_CASE("prepared writes change nothing until committed, and leave nothing when dropped", "[fs]")
{
	test::TempDir t;
	const std::string a = t / "a.yaml", b = t / "b.yaml";
	REQUIRE(fs::write_file_atomic(a, "a1\n"));
	auto dir = fs::open_dir(t.path());
	REQUIRE(dir);
	{
		auto pa = fs::prepare_file_atomic(a, "a2\n");
		REQUIRE(pa);
		CHECK(pa->outcome() == fs::WriteOutcome::Written);
		auto pb = fs::prepare_file_atomic(b, "b1\n");
		REQUIRE(pb);
		CHECK(fs::read_file(a).value() == "a1\n");  // prepared: still the old bytes
		CHECK_FALSE(::access(b.c_str(), F_OK) == 0);
		REQUIRE(pb->commit());
		CHECK(fs::read_file(b).value() == "b1\n");
		REQUIRE(pb->commit());  // a second commit has nothing left to do
					// pa is dropped uncommitted: a keeps its bytes and its temp file goes.
	}
	CHECK(fs::read_file(a).value() == "a1\n");
	CHECK(fs::list_dir(dir->get(), t.path()).value() == std::vector<std::string>{"a.yaml", "b.yaml"});

	auto same = fs::prepare_file_atomic(a, "a1\n");
	REQUIRE(same);
	CHECK(same->outcome() == fs::WriteOutcome::Unchanged);
	REQUIRE(same->commit());

	// Moved from, the source owns nothing: only the destination removes (or commits) the temp file.
	auto p1 = fs::prepare_file_atomic(a, "a3\n");
	REQUIRE(p1);
	fs::PreparedWrite moved = std::move(*p1);
	p1 = fs::PreparedWrite();
	CHECK(fs::list_dir(dir->get(), t.path()).value().size() == 3);
	REQUIRE(moved.commit());
	CHECK(fs::read_file(a).value() == "a3\n");
	CHECK(fs::list_dir(dir->get(), t.path()).value() == std::vector<std::string>{"a.yaml", "b.yaml"});
}

TEST_CASE("remove_tree_at never follows symlinks", "[fs]")
{
	test::TempDir t;
	t.write("keep/precious", "data");
	t.write("tree/a/b/file", "x");
	t.link(t / "keep", "tree/a/link-to-keep");
	REQUIRE(fs::remove_tree_at(AT_FDCWD, t / "tree", "tree"));
	CHECK(::access((t / "tree").c_str(), F_OK) != 0);
	CHECK(fs::read_file(t / "keep/precious").value() == "data");
	CHECK(fs::remove_tree_at(AT_FDCWD, t / "tree", "tree"));  // already gone: fine
}

TEST_CASE("a directory removed while open lists as empty, as readdir() says", "[fs]")
{
	test::TempDir t;
	t.write("gone/a", "x");
	auto dir = fs::open_dir(t / "gone");
	REQUIRE(dir);
	REQUIRE(::unlink((t / "gone/a").c_str()) == 0);
	REQUIRE(::rmdir((t / "gone").c_str()) == 0);
	CHECK(fs::list_dir(dir->get(), "gone").value().empty());
	CHECK(fs::dir_is_empty(dir->get(), "gone").value());
}
