// The spec planner: plan_specs() makes every spec from a run's snapshot of the machine's
// devices and hook, and from the root's manifest, without touching the file system. These cases give
// it snapshots made up in memory, as a run would have read them: what it plans is what generate_cdi()
// makes of the same inputs, planning again gives the same bytes and leaves the snapshot as it was (the
// ENOSPC retry plans a second time), and each fact of the snapshot shows in the plan.
#include "cdi_state.hpp"
#include "consumer_check.hpp"
#include "side_specs.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

constexpr const char *DRIVER_ROOT = "/run/nvidia/driver";

DeviceNode node(std::string path, unsigned major, unsigned minor, unsigned mode = 0666, unsigned gid = 0)
{
	return DeviceNode{std::move(path), major, minor, mode, gid};
}

Manifest manifest()
{
	Manifest m;
	m.driver_version = "550.54.15";
	m.multiarch = "x86_64-linux-gnu";
	ManifestEntry lib;
	lib.path = "lib/x86_64-linux-gnu/libcuda.so.550.54.15";
	ManifestEntry link;
	link.type = ManifestEntry::Type::Link;
	link.path = "lib/x86_64-linux-gnu/libcuda.so.1";
	link.target = "libcuda.so.550.54.15";
	ManifestEntry smi;
	smi.path = "bin/nvidia-smi";
	smi.mode = 0755;
	m.entries = {smi, link, lib};
	return m;
}

// Two whole GPUs, the control nodes, and (when asked) IMEX channels and an NVSwitch.
MachineDevices machine(bool imex = false, bool nvswitch = false)
{
	DeviceInventory inv;
	inv.source = "proc";
	inv.listed_gpus = 2;
	inv.control = {node("/dev/nvidia-uvm", 509, 0), node("/dev/nvidiactl", 195, 255)};
	for (unsigned i = 0; i < 2; i++) {
		Gpu g;
		g.pci = "0000:1" + std::to_string(8 + i) + ":00.0";
		g.minor = i;
		g.uuid = "GPU-0000000" + std::to_string(i) + "-1111-2222-3333-444455556666";
		g.nodes = {node("/dev/nvidia" + std::to_string(i), 195, i)};
		inv.gpus.push_back(g);
	}
	if (imex)
		inv.imex_channels = {{0, node("/dev/nvidia-caps-imex-channels/channel0", 237, 0)}};
	if (nvswitch)
		inv.fabric.push_back(FabricDevices{NVSWITCH_CDI_KIND, {node("/dev/nvidia-nvswitch0", 236, 0, 0600)}, {}});
	MachineDevices m;
	m.devices = std::move(inv);
	return m;
}

std::size_t count(const std::vector<std::string> &v, const std::string &s) { return static_cast<std::size_t>(std::count(v.begin(), v.end(), s)); }

}  // namespace

TEST_CASE("the plan is generate_cdi() of the snapshot, the same each time, and leaves the snapshot as it was", "[plan]")
{
	const Manifest root = manifest();
	MachineDevices m = machine(/*imex=*/true);
	m.hook_path = "/usr/bin/nvidia-cdi-hook";
	m.hook_commands = {"create-symlinks", "update-ldcache"};
	const auto first = plan_specs(DRIVER_ROOT, root, m);
	REQUIRE(first);
	const auto again = plan_specs(DRIVER_ROOT, root, m);
	REQUIRE(again);
	CHECK(again->spec.yaml == first->spec.yaml);
	REQUIRE(again->imex);
	CHECK(again->imex->yaml == first->imex->yaml);
	CHECK(m.devices->warnings.empty());  // nothing of a plan goes back into the snapshot

	const CdiSpec direct = generate_cdi(CdiInputs{&root, DRIVER_ROOT, &*m.devices, m.hook_path, m.hook_commands});
	CHECK(first->spec.yaml == direct.yaml);
	CHECK(first->spec.hooks > 0);
	CHECK(first->spec.yaml.find("/run/nvidia/driver/lib/x86_64-linux-gnu/libcuda.so.550.54.15") != std::string::npos);
	CHECK(first->spec.yaml.find("GPU-00000001-1111-2222-3333-444455556666") != std::string::npos);
	CHECK(first->devices.gpus.size() == 2);
}

TEST_CASE("a hook that cannot say what it has: no hook in the plan, and its warning once per plan", "[plan]")
{
	const Manifest root = manifest();
	MachineDevices m = machine();
	m.hook_warning = "Not using /usr/bin/nvidia-cdi-hook: it printed no COMMANDS";
	for (int i = 0; i < 2; i++) {
		const auto plan = plan_specs(DRIVER_ROOT, root, m);
		REQUIRE(plan);
		CHECK(plan->spec.hooks == 0);
		CHECK(plan->spec.yaml.find("nvidia-cdi-hook") == std::string::npos);
		CHECK(count(plan->devices.warnings, m.hook_warning) == 1);
	}
}

TEST_CASE("devices that could not be read fail the plan with what the read said", "[plan]")
{
	MachineDevices m;
	m.devices = fail(make_error("No NVIDIA GPU is offered to this machine: /dev/nvidia0 is missing"));
	const auto plan = plan_specs(DRIVER_ROOT, manifest(), m);
	REQUIRE_FALSE(plan);
	CHECK(plan.error().message == "No NVIDIA GPU is offered to this machine: /dev/nvidia0 is missing");
	// A snapshot nobody filled in is not a machine without devices.
	REQUIRE_FALSE(plan_specs(DRIVER_ROOT, manifest(), MachineDevices{}));
}

TEST_CASE("side specs are planned exactly for the device classes the snapshot has", "[plan]")
{
	const Manifest root = manifest();
	const auto none = plan_specs(DRIVER_ROOT, root, machine());
	REQUIRE(none);
	for (const char *kind : {IMEX_CDI_KIND, NVSWITCH_CDI_KIND, GDRCOPY_CDI_KIND, GDS_CDI_KIND})
		CHECK(none->side(kind) == nullptr);

	const auto both = plan_specs(DRIVER_ROOT, root, machine(/*imex=*/true, /*nvswitch=*/true));
	REQUIRE(both);
	REQUIRE(both->side(IMEX_CDI_KIND));
	CHECK(both->side(IMEX_CDI_KIND)->yaml.find("/dev/nvidia-caps-imex-channels/channel0") != std::string::npos);
	REQUIRE(both->side(NVSWITCH_CDI_KIND));
	CHECK(both->side(NVSWITCH_CDI_KIND)->yaml.find("/dev/nvidia-nvswitch0") != std::string::npos);
	CHECK(both->side(GDRCOPY_CDI_KIND) == nullptr);
	CHECK(both->side(GDS_CDI_KIND) == nullptr);
	// The GPUs' spec does not change with the side classes.
	CHECK(both->spec.yaml == none->spec.yaml);
}

TEST_CASE("the driver root the plan serves is the one it is given", "[plan]")
{
	const auto plan = plan_specs("/run/nvidia/other", manifest(), machine());
	REQUIRE(plan);
	CHECK(plan->spec.yaml.find("/run/nvidia/other/lib/x86_64-linux-gnu/libcuda.so.550.54.15") != std::string::npos);
	CHECK(plan->spec.yaml.find("/run/nvidia/driver/") == std::string::npos);
}

TEST_CASE("what the consumer check takes from a planned spec is what it would parse from its bytes", "[plan][consumer]")
{
	// setup and verify hand the consumer check the plan's kind, cdiVersion and device names instead of
	// the bytes (the boot path's re-run no longer parses the spec it has just generated): the two must
	// never disagree, for the GPUs' spec and each side spec.
	MachineDevices m = machine(/*imex=*/true, /*nvswitch=*/true);
	m.hook_path = "/usr/bin/nvidia-cdi-hook";
	m.hook_commands = {"create-symlinks", "update-ldcache"};
	const auto plan = plan_specs(DRIVER_ROOT, manifest(), m);
	REQUIRE(plan);
	std::vector<const CdiSpec *> specs = {&plan->spec, plan->side(IMEX_CDI_KIND), plan->side(NVSWITCH_CDI_KIND)};
	for (const CdiSpec *spec : specs) {
		REQUIRE(spec);
		const SpecFacts planned = spec_facts(*spec);
		const auto parsed = spec_facts(spec->yaml, "/etc/cdi/nvidia.yaml");
		REQUIRE(parsed);
		CHECK(planned.kind == parsed->kind);
		CHECK(planned.cdi_version == parsed->cdi_version);
	}
	CHECK(spec_facts(plan->spec).kind == CDI_KIND);
	// Bytes that are no document are a spec the CDI library skips.
	CHECK_FALSE(spec_facts(std::string("- just\n- a list\n"), "/etc/cdi/nvidia.yaml"));
	CHECK_FALSE(spec_facts(std::string("key: [unclosed\n"), "/etc/cdi/nvidia.yaml"));
}
