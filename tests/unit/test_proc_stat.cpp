// parse_proc_stat: the state of a process from its /proc/PID/stat line, whatever its command name
// holds; read_proc_stat on this very process.
#include "proc_stat.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace unbounded;

namespace {
// Fields 4..21 as any process has them, then the start time (field 22) and a few more.
const std::string middle = " 1 100 100 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 ";
}  // namespace

TEST_CASE("parse_proc_stat reads the state after the command name", "[proc]")
{
	auto st = parse_proc_stat("4242 (nvidia-gridd) S" + middle + "987654 1000 2000\n");
	CHECK(st.state == 'S');
	CHECK_FALSE(st.exited());
}

TEST_CASE("parse_proc_stat reads past a command name that holds ') ' and spaces", "[proc]")
{
	auto st = parse_proc_stat("7 (a) R 1 (b) Z" + middle + "55 1\n");
	CHECK(st.state == 'Z');
	CHECK(st.exited());
	CHECK(parse_proc_stat("8 (x) X" + middle + "1\n").exited());
}

TEST_CASE("parse_proc_stat says what it could not read", "[proc]")
{
	CHECK(parse_proc_stat("").state == '?');
	CHECK(parse_proc_stat("9 (no closing paren S 1 2").state == '?');
	CHECK(parse_proc_stat("9 (x)").state == '?');
	CHECK_FALSE(parse_proc_stat("9 (x)").exited());  // unknown is not "exited": the caller decides
	CHECK(parse_proc_stat("9 (x) S 1 100").state == 'S');
	CHECK(parse_proc_stat("9 (x) SS" + middle + "5").state == '?');
}

TEST_CASE("read_proc_stat reads this process and nothing for PID 0", "[proc]")
{
	auto self = read_proc_stat(static_cast<std::uint32_t>(::getpid()));
	REQUIRE(self);
	CHECK_FALSE(self->exited());  // 'R' on a kernel; qemu-user's own /proc/self/stat says '0' (the arm64 tier)
	CHECK_FALSE(read_proc_stat(0));
}
