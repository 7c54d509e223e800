// Running a program of the machine's to ask it (containerd config dump, nvidia-cdi-hook --help): what
// it said and how it ended, bounded in time and bytes, chrooted into the machine root when asked.
#include "run_probe.hpp"
#include "temp_dir.hpp"
#include "unique_fd.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace unbounded;
using namespace std::chrono_literals;

TEST_CASE("a program's output, exit status and last line of error", "[probe]")
{
	const ProbeResult r = run_program(Probe{"/bin/sh", {"-c", "echo out; echo first >&2; echo 'last line' >&2; exit 3"}, "", 5000ms, 4096});
	CHECK(r.ran);
	CHECK(!r.ok());
	CHECK(r.status == 3);
	CHECK(r.out == "out\n");
	CHECK(r.last_err_line() == "last line");
	CHECK(run_program(Probe{"/bin/sh", {"-c", "printf yes"}, "", 5000ms, 4096}).ok());
}

TEST_CASE("a program past its time is killed, with what it started", "[probe]")
{
	test::TempDir dir;
	const auto start = std::chrono::steady_clock::now();
	// A grandchild that would outlive it, its pid written where the test can see it.
	const ProbeResult r =
		run_program(Probe{"/bin/sh", {"-c", "sleep 100 & echo $! > " + (dir / "pid") + "; wait"}, "", 300ms, 4096});
	CHECK(r.timed_out);
	CHECK(!r.ran);
	CHECK(std::chrono::steady_clock::now() - start < 5s);
	std::string pid;
	std::ifstream(dir / "pid") >> pid;
	REQUIRE(!pid.empty());
	// SIGKILLed: gone, or a zombie until init (or a subreaper) reaps it.
	auto alive = [&] {
		std::string stat;
		std::getline(std::ifstream("/proc/" + pid + "/stat"), stat);
		const auto close = stat.rfind(')');
		return close != std::string::npos && stat.compare(close + 2, 1, "Z") != 0;
	};
	for (int i = 0; i < 100 && alive(); i++)
		::usleep(10000);
	CHECK(!alive());
}

TEST_CASE("output past the bound is no answer", "[probe]")
{
	const ProbeResult r = run_program(Probe{"/bin/sh", {"-c", "yes | head -c 100000"}, "", 5000ms, 1000});
	CHECK(r.too_big);
	CHECK(!r.ok());
}

TEST_CASE("a program that cannot be run says why", "[probe]")
{
	const ProbeResult r = run_program(Probe{"/nonexistent/containerd", {"--version"}, "", 5000ms, 4096});
	CHECK(!r.ran);
	CHECK(r.error == "execve: No such file or directory");
}

TEST_CASE("chrooted, the program is the machine root's", "[probe]")
{
	if (::geteuid() != 0) {
		WARN("not root: chroot is refused, and said so");
		CHECK(run_program(Probe{"/bin/sh", {"-c", "true"}, "/tmp", 5000ms, 4096}).error.starts_with("chroot: "));
		return;
	}
	test::TempDir root;
	::chmod(root.path().c_str(), 0755);  // a machine's /: the program runs there as nobody
	// /bin/sh is this host's, not the root's: inside the empty root there is none.
	const ProbeResult r = run_program(Probe{"/bin/sh", {"-c", "true"}, root.path(), 5000ms, 4096});
	CHECK(!r.ran);
	CHECK(r.error == "execve: No such file or directory");
}

TEST_CASE("no descriptor of the caller's past stderr reaches the program", "[probe]")
{
	// One on this host's /, which would lead out of any chroot; not O_CLOEXEC on purpose.
	const UniqueFd host_root(::open("/", O_PATH | O_DIRECTORY));
	REQUIRE(host_root);
	const std::string fd = std::to_string(host_root.get());
	const ProbeResult r = run_program(
		Probe{"/bin/sh", {"-c", "ls /proc/self/fd; [ -e /proc/self/fd/" + fd + " ] && echo leaked; exit 0"}, "", 5000ms, 4096});
	REQUIRE(r.ran);
	CHECK(r.out.find("leaked") == std::string::npos);
	CHECK(r.out.find("0\n1\n2\n") == 0);
}

TEST_CASE("chrooted, the program runs as nobody", "[probe]")
{
	if (::geteuid() != 0) {
		WARN("not root: no chroot to test");
		return;
	}
	test::TempDir root;
	::chmod(root.path().c_str(), 0755);
	// This host's dash and its C library, placed as a machine has them.
	for (const char *file : {"/bin/sh", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"}) {
		char real[PATH_MAX];
		REQUIRE(::realpath(file, real));
		(void)fs::mkdir_p(fs::dirname(root / (file + 1)), 0755);
		std::ifstream in(real, std::ios::binary);
		std::ofstream(root / (file + 1), std::ios::binary) << in.rdbuf();
		::chmod((root / (file + 1)).c_str(), 0755);
	}
	const ProbeResult r = run_program(Probe{"/bin/sh", {"-c", "true > /x && echo wrote; echo ran"}, root.path(), 5000ms, 4096});
	INFO(r.error << " " << r.err);
	REQUIRE(r.ran);
	CHECK(r.out == "ran\n");  // as root it would have written /x
	CHECK(!root.exists("x"));
}
