// `binds --apply`'s plan: what a running machine must be given or lose for its mounts to be what the
// files say, from what is mounted at each of our destinations in it.
#include "live_apply.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

using namespace unbounded::host;

namespace {

BindSpec ro(const std::string &src, const std::string &dest) { return {src, dest, true}; }
BindSpec rw(const std::string &node) { return {node, node, false}; }

}  // namespace

TEST_CASE("plan_live: a machine with every bind from its sources has nothing to change", "[live]")
{
	const std::vector<BindSpec> wanted = {ro("/usr/lib/x86_64-linux-gnu", "/run/host-nvidia/0"), rw("/dev/nvidia0")};
	const std::map<std::string, LiveMount> mounted = {{"/run/host-nvidia/0", {true, true}}, {"/dev/nvidia0", {true, false}}};
	CHECK(plan_live(wanted, mounted).empty());
}

TEST_CASE("plan_live: a GPU reassigned adds the new node and unmounts the old one", "[live]")
{
	const std::vector<BindSpec> wanted = {rw("/dev/nvidiactl"), rw("/dev/nvidia1")};
	const std::map<std::string, LiveMount> mounted = {{"/dev/nvidiactl", {true, false}}, {"/dev/nvidia0", {false, false}}};
	const auto p = plan_live(wanted, mounted);
	REQUIRE(p.add == std::vector<BindSpec>{rw("/dev/nvidia1")});
	CHECK(p.replace.empty());
	CHECK(p.remove == std::vector<std::string>{"/dev/nvidia0"});
}

TEST_CASE("plan_live: a mount from another source or writable where it should not be is replaced", "[live]")
{
	const std::vector<BindSpec> wanted = {ro("/usr/lib64", "/run/host-nvidia/0"), ro("/usr/bin", "/run/host-nvidia/1")};
	const std::map<std::string, LiveMount> mounted = {{"/run/host-nvidia/0", {false, true}}, {"/run/host-nvidia/1", {true, false}}};
	const auto p = plan_live(wanted, mounted);
	CHECK(p.add.empty());
	CHECK(p.replace == wanted);
	CHECK(p.remove.empty());
}

TEST_CASE("bind lines: source, destination and read-only, and which destinations are ours", "[live]")
{
	CHECK(bind_spec({"Files", "BindReadOnly", "/usr/bin:/run/host-nvidia/1"}) == ro("/usr/bin", "/run/host-nvidia/1"));
	CHECK(bind_spec({"Files", "Bind", "/dev/nvidia0"}) == rw("/dev/nvidia0"));
	CHECK(bind_spec({"Files", "Bind", "/srv/a:/srv/b:rbind"}) == BindSpec{"/srv/a", "/srv/b", false});
	CHECK_FALSE(bind_spec({"Exec", "SystemCallFilter", "bpf"}));
	CHECK(owned_destination("/run/host-nvidia/3"));
	CHECK(owned_destination("/dev/nvidia-caps/nvidia-cap1"));
	CHECK(owned_destination("/run/host-nvidia-settings"));
	CHECK_FALSE(owned_destination("/run/host-nvidia-other"));
	CHECK_FALSE(owned_destination("/var/lib/fake-proc-driver"));
	CHECK_FALSE(owned_destination("/dev/net/tun"));
}

TEST_CASE("process_holding: a process with the node open is found, by the device it opened", "[live]")
{
	const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK(process_holding({::getpid()}, "/dev/null") == ::getpid());
	CHECK_FALSE(process_holding({::getpid()}, "/dev/zero"));  // another device: /dev/null's fd does not count
	CHECK_FALSE(process_holding({::getpid()}, "/nonexistent-node"));
	::close(fd);
}
