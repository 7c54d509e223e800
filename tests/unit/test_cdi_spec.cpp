// The CDI spec's YAML is written straight from its parts (SpecWriter in cdi_spec.cpp); these cases
// hold it byte-identical to what yaml-cpp writes for the document it holds, for the shapes the
// goldens do not all cover: MIG devices, hooks, additional gids, devices without mounts, IMEX, a
// device with no edits.
#include "bounded_parse.hpp"
#include "cdi_spec.hpp"
#include "spec_marker.hpp"
#include "yaml_reference.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

DeviceNode node(std::string path, unsigned major, unsigned minor, unsigned mode = 0666, unsigned gid = 0)
{
	return DeviceNode{std::move(path), major, minor, mode, gid};
}

Manifest manifest()
{
	Manifest m;
	m.driver_version = "535.104.05";
	m.multiarch = "aarch64-linux-gnu";
	auto file = [&](std::string p) {
		ManifestEntry e;
		e.path = std::move(p);
		m.entries.push_back(e);
	};
	auto link = [&](std::string p, std::string t) {
		ManifestEntry e;
		e.type = ManifestEntry::Type::Link;
		e.path = std::move(p);
		e.target = std::move(t);
		m.entries.push_back(e);
	};
	file("bin/nvidia-smi");
	link("lib/aarch64-linux-gnu/libcuda.so", "libcuda.so.1");
	link("lib/aarch64-linux-gnu/libcuda.so.1", "libcuda.so.535.104.05");
	file("lib/aarch64-linux-gnu/libcuda.so.535.104.05");
	file("lib/aarch64-linux-gnu/libGLX_nvidia.so.535.104.05");
	file("lib/aarch64-linux-gnu/vdpau/libvdpau_nvidia.so.535.104.05");
	return m;
}

DeviceInventory inventory()
{
	DeviceInventory inv;
	inv.control = {node("/dev/nvidiactl", 195, 255), node("/dev/nvidia-uvm", 509, 0, 0660, 44)};
	Gpu whole;
	whole.minor = 0;
	whole.uuid = "GPU-3f1c0a52-8e4b-4d0e-9c1a-2b7e6d5f4a10";
	whole.nodes = {node("/dev/nvidia0", 195, 0), node("/dev/dri/card1", 226, 1, 0660, 44)};
	Gpu mig;
	mig.minor = 1;
	mig.mig_enabled = true;
	mig.nodes = {node("/dev/nvidia1", 195, 1)};
	for (unsigned gi : {7u, 8u})
		mig.migs.push_back(MigDevice{node("/dev/nvidia-caps/nvidia-cap" + std::to_string(3 + 135 + gi * 9), 508, 3 + 135 + gi * 9, 0444),
					     node("/dev/nvidia-caps/nvidia-cap" + std::to_string(4 + 135 + gi * 9), 508, 4 + 135 + gi * 9, 0444)});
	inv.gpus = {whole, mig};
	return inv;
}

// The spec read back and written again by yaml-cpp: the same bytes.
void check_yaml_cpp_writes_it(const CdiSpec &spec)
{
	auto doc = parse_yaml_bounded(spec.yaml, "spec.yaml");
	REQUIRE(doc);
	CHECK(spec.yaml == spec_marker_line() + yaml_reference::block_yaml(*doc));
}

}  // namespace

TEST_CASE("the spec's YAML is what yaml-cpp writes for its document", "[cdi]")
{
	const Manifest m = manifest();
	const DeviceInventory inv = inventory();
	const std::set<std::string> all_hooks{"create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification"};
	for (const auto &[hook, commands] : std::vector<std::pair<std::optional<std::string>, std::set<std::string>>>{
		     {std::nullopt, {}}, {"/usr/bin/nvidia-cdi-hook", all_hooks}, {"/usr/bin/nvidia-cdi-hook", {"create-symlinks"}}}) {
		CdiSpec spec = generate_cdi(CdiInputs{&m, "/run/nvidia/driver", &inv, hook, commands});
		INFO("hook " << (hook ? *hook : "none") << ", " << commands.size() << " subcommands");
		check_yaml_cpp_writes_it(spec);
		CHECK(spec.cdi_version == "0.7.0");  // the gid-owned nodes
		CHECK(spec.yaml.find("name: \"1:1\"") != std::string::npos);
	}
	const std::vector<ImexChannel> channels{{0, node("/dev/nvidia-caps-imex-channels/channel0", 237, 0)},
						{9, node("/dev/nvidia-caps-imex-channels/channel9", 237, 9, 0660, 44)}};
	CdiSpec imex = generate_imex_cdi(channels);
	check_yaml_cpp_writes_it(imex);
	CHECK(imex.cdi_version == "0.7.0");
}
