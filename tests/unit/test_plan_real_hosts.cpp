// The spec planner on the real hosts: each snapshot in host-snapshots/ was
// recorded from a real setup on one of test_real_hosts.py's hosts (Debian's real NVIDIA packages laid
// out as Debian installs them, bound as the README's recipe says; unbounded_tests/host_snapshots.py):
// the driver root's manifest and the spec setup wrote beside it. plan_specs(), given that manifest and
// the machine's devices made up in memory as the recording machine had them, must plan the very bytes
// setup wrote: nothing of the plan may come from anywhere but the snapshot. test_real_hosts.py
// records afresh and holds these files to what the real packages give today.
#include "cdi_state.hpp"
#include "consumer_check.hpp"
#include "manifest.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

using namespace unbounded;

namespace {

// host_snapshots.HOSTS: every one must be there (a missing snapshot fails, never skips).
constexpr const char *HOSTS[] = {"bookworm-535-readme-binds", "bookworm-535-nvidia-current", "bookworm-tesla-535",
				 "trixie-550-readme-binds"};

std::string snapshot_file(const std::string &host, const std::string &name)
{
	const char *dir = std::getenv("HOST_SNAPSHOTS_DIR");
	REQUIRE(dir != nullptr);
	const std::string path = std::string(dir) + "/" + host + "/" + name;
	std::ifstream in(path, std::ios::binary);
	INFO(path);
	REQUIRE(in);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

// The recording machine's devices (host_snapshots.machine(), harness.MachineRoot): the control
// nodes and two GPUs, every node root's and 0666, GPUs listed in /proc, no hook, no IPC sockets.
MachineDevices recording_machine()
{
	DeviceInventory inv;
	inv.source = "proc";
	inv.listed_gpus = 2;
	inv.control = {DeviceNode{"/dev/nvidia-modeset", 195, 254, 0666, 0}, DeviceNode{"/dev/nvidia-uvm", 509, 0, 0666, 0},
		       DeviceNode{"/dev/nvidia-uvm-tools", 509, 1, 0666, 0}, DeviceNode{"/dev/nvidiactl", 195, 255, 0666, 0}};
	for (unsigned i = 0; i < 2; i++) {
		Gpu g;
		g.pci = "0000:1" + std::to_string(8 + i) + ":00.0";
		g.minor = i;
		g.uuid = "GPU-0000000" + std::to_string(i) + "-8e4b-4d0e-9c1a-2b7e6d5f4a10";
		g.nodes = {DeviceNode{"/dev/nvidia" + std::to_string(i), 195, i, 0666, 0}};
		inv.gpus.push_back(g);
	}
	MachineDevices m;
	m.devices = std::move(inv);
	return m;
}

// Our version in the spec's first line as the snapshots keep it (host_snapshots.without_version).
std::string without_version(std::string spec)
{
	const std::string marker = "# Written by unbounded-nvidia-setup ";
	if (spec.starts_with(marker))
		if (const auto end = spec.find(';'); end != std::string::npos && end < spec.find('\n'))
			spec.replace(marker.size(), end - marker.size(), "@VERSION@");
	return spec;
}

}  // namespace

TEST_CASE("the planner makes each real host's spec from its snapshot alone", "[plan][real-hosts]")
{
	for (const char *host : HOSTS) {
		INFO(host);
		const std::string manifest_text = snapshot_file(host, "manifest.json");
		const std::string recorded = snapshot_file(host, "nvidia.yaml");
		auto manifest = Manifest::from_json(manifest_text, std::string(host) + "/manifest.json");
		REQUIRE(manifest);
		const auto plan = plan_specs("/run/nvidia/driver", *manifest, recording_machine());
		REQUIRE(plan);
		CHECK(recorded.starts_with("# Written by unbounded-nvidia-setup @VERSION@;"));
		CHECK(without_version(plan->spec.yaml) == recorded);
		// What the consumer check takes from the plan is what it would parse from the written bytes.
		const auto parsed = spec_facts(recorded, "/etc/cdi/nvidia.yaml");
		REQUIRE(parsed);
		const SpecFacts planned = spec_facts(plan->spec);
		CHECK(planned.kind == parsed->kind);
		CHECK(planned.cdi_version == parsed->cdi_version);
		// Planned again from the same snapshot: the same bytes (the ENOSPC retry plans twice).
		const auto again = plan_specs("/run/nvidia/driver", *manifest, recording_machine());
		REQUIRE(again);
		CHECK(again->spec.yaml == plan->spec.yaml);

		// What the plan says of the real files: each file of the root mounted read-only from the
		// driver root at its place, the libraries' directory the driver's, no side spec.
		const std::set<std::string> mounted(plan->spec.mount_host_paths.begin(), plan->spec.mount_host_paths.end());
		std::size_t files = 0;
		for (const auto &e : manifest->entries)
			if (e.type == ManifestEntry::Type::File) {
				files++;
				CHECK(mounted.count("/run/nvidia/driver/" + e.path) == 1);
			}
		CHECK(files > 0);
		CHECK(plan->spec.devices == 5);  // 0, 1, the two UUIDs, all
		CHECK(plan->spec.yaml.find("NVIDIA_CTK_LIBCUDA_DIR=/lib/" + manifest->multiarch) != std::string::npos);
		CHECK(plan->imex == std::nullopt);
		CHECK(plan->fabric.empty());
	}
}
