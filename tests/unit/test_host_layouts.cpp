// Issue 24's rules as units: which GPUs a machine offers (the partition, its indices, UUID names and
// "all"), the closure check over DT_NEEDED, Debian's flavour directories, and what a failed
// resolution tells the operator to bind.
#include "bounded_parse.hpp"
#include "cdi_spec.hpp"
#include "devices.hpp"
#include "driver_discovery.hpp"
#include "elf.hpp"
#include "staging.hpp"
#include "staging_layout.hpp"
#include "temp_dir.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <fcntl.h>
#include <fstream>
#include <sstream>

using namespace unbounded;

namespace {

std::string fixture(const std::string &name)
{
	const char *d = std::getenv("FIXTURE_DIR");
	REQUIRE(d != nullptr);
	return std::string(d) + "/" + name;
}

void copy_fixture(const test::TempDir &t, const std::string &name, const std::string &rel)
{
	std::ifstream in(fixture(name), std::ios::binary);
	REQUIRE(in);
	std::stringstream ss;
	ss << in.rdbuf();
	t.write(rel, ss.str());
}

Gpu listed(std::string pci, unsigned minor)
{
	Gpu g;
	g.pci = std::move(pci);
	g.minor = minor;
	g.uuid = "GPU-" + std::string(7, '0') + std::to_string(minor) + "-8e4b-4d0e-9c1a-2b7e6d5f4a10";
	return g;
}

std::size_t count_warnings(const DriverSet &d, const std::string &needle)
{
	return static_cast<std::size_t>(
		std::count_if(d.warnings.begin(), d.warnings.end(), [&](const std::string &w) { return w.find(needle) != std::string::npos; }));
}

}  // namespace

TEST_CASE("a machine offers the listed GPUs it has nodes of, numbered 0..N-1 in PCI order", "[devices][partition]")
{
	// /proc/driver/nvidia/gpus lists the host's eight; the machine was given /dev/nvidia2 and /dev/nvidia3.
	std::vector<Gpu> all;
	for (unsigned m : {7u, 3u, 0u, 2u, 5u, 1u, 6u, 4u}) {  // as a directory listing may give them
		char pci[16];
		std::snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x18 + m);
		all.push_back(listed(pci, m));
	}
	auto parts = partition_gpus(all, [](unsigned minor) -> std::optional<DeviceNode> {
		if (minor != 2 && minor != 3)
			return std::nullopt;
		return DeviceNode{"/dev/nvidia" + std::to_string(minor), 195, minor, 0666, 0};
	});
	REQUIRE(parts.bound.size() == 2);
	CHECK(parts.bound[0].pci == "0000:1a:00.0");
	CHECK(parts.bound[1].pci == "0000:1b:00.0");
	CHECK(parts.bound[0].nodes.front().path == "/dev/nvidia2");
	CHECK(parts.unbound == std::vector<std::string>{"0000:18:00.0", "0000:19:00.0", "0000:1c:00.0", "0000:1d:00.0",
							"0000:1e:00.0", "0000:1f:00.0"});

	SECTION("the spec names exactly those: by index, by UUID, and in all")
	{
		DeviceInventory inv;
		inv.control = {DeviceNode{"/dev/nvidiactl", 195, 255, 0666, 0}};
		inv.gpus = parts.bound;
		Manifest m;
		m.driver_version = "535.104.05";
		m.multiarch = "x86_64-linux-gnu";
		ManifestEntry e;
		e.path = "lib/x86_64-linux-gnu/libcuda.so.535.104.05";
		m.entries.push_back(e);
		const CdiSpec spec = generate_cdi(CdiInputs{&m, "/run/nvidia/driver", &inv, std::nullopt, {}});
		const auto doc = parse_yaml_bounded(spec.yaml, "spec.yaml").value();
		std::map<std::string, std::vector<std::string>> devices;
		for (const auto &d : doc["devices"])
			for (const auto &n : d["containerEdits"]["deviceNodes"])
				devices[d["name"].get<std::string>()].push_back(n["path"].get<std::string>());
		CHECK(devices.size() == 5);
		CHECK(devices["0"] == std::vector<std::string>{"/dev/nvidia2"});
		CHECK(devices["1"] == std::vector<std::string>{"/dev/nvidia3"});
		CHECK(devices[*parts.bound[0].uuid] == std::vector<std::string>{"/dev/nvidia2"});
		CHECK(devices[*parts.bound[1].uuid] == std::vector<std::string>{"/dev/nvidia3"});
		CHECK(devices["all"] == std::vector<std::string>{"/dev/nvidia2", "/dev/nvidia3"});
		CHECK(spec.yaml.find("nvidia0") == std::string::npos);
		CHECK(spec.yaml.find("GPU-00000000") == std::string::npos);
	}
	SECTION("none bound: nothing offered, every one named")
	{
		auto none = partition_gpus(all, [](unsigned) { return std::nullopt; });
		CHECK(none.bound.empty());
		CHECK(none.unbound.size() == 8);
	}
}

TEST_CASE("DT_NEEDED entries that name driver libraries are read, the image's are not", "[elf][closure]")
{
	UniqueFd fd(::open(fixture("closure-libGLX_nvidia.so.535.104.05").c_str(), O_RDONLY | O_CLOEXEC));
	REQUIRE(fd.valid());
	auto info = elf::read_info(fd.get(), "closure fixture");
	REQUIRE(info);
	CHECK(info->soname == "libGLX_nvidia.so.0");
	std::vector<std::string> needed = info->needed;
	std::sort(needed.begin(), needed.end());
	CHECK(needed == std::vector<std::string>{"libnvidia-glcore.so.535.104.05", "libnvidia-ptxjitcompiler.so.1"});
	CHECK(elf::is_driver_library_name("libEGL_nvidia.so.0"));
	CHECK(elf::is_driver_library_name("libcuda.so.1"));
	CHECK(elf::is_driver_library_name("libnvidia-tls.so.535.104.05"));
	CHECK_FALSE(elf::is_driver_library_name("libc.so.6"));
	CHECK_FALSE(elf::is_driver_library_name("libX11.so.6"));
	CHECK_FALSE(elf::is_driver_library_name("libGL.so.1"));
}

TEST_CASE("the closure check names what a library of the root needs and the root lacks", "[discovery][closure]")
{
	const std::string v = "535.104.05";
	test::TempDir t;
	for (const char *lib : {"libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libEGL_nvidia"})
		copy_fixture(t, std::string(lib) + ".so." + v, "lib/" + std::string(lib) + ".so." + v);
	copy_fixture(t, "closure-libGLX_nvidia.so." + v, "lib/libGLX_nvidia.so." + v);
	auto discover = [&] {
		auto st = Staging::from_dirs({{t / "lib", "/run/host-nvidia/0"}});
		REQUIRE(st);
		auto d = discover_driver(DiscoveryInput{&*st, v, nullptr});
		REQUIRE(d);
		return std::move(*d);
	};

	SECTION("libnvidia-glcore (DT_NEEDED) and libnvidia-eglcore (loaded by name) missing")
	{
		const DriverSet d = discover();
		CHECK(count_warnings(d, "/libGLX_nvidia.so." + v + " needs libnvidia-glcore.so." + v + ", which is not in the staging mounts") == 1);
		CHECK(count_warnings(d, "/libEGL_nvidia.so." + v + " needs libnvidia-eglcore.so." + v) == 1);
		CHECK(count_warnings(d, "libnvidia-ptxjitcompiler") == 0);  // there, under its SONAME
		CHECK(count_warnings(d, " needs ") == 2);
		CHECK(count_warnings(d, "bind the host directory that holds it") == 2);
	}
	SECTION("all there: nothing said")
	{
		copy_fixture(t, "libnvidia-glcore.so." + v, "lib/libnvidia-glcore.so." + v);
		copy_fixture(t, "libnvidia-eglcore.so." + v, "lib/libnvidia-eglcore.so." + v);
		CHECK(count_warnings(discover(), " needs ") == 0);
	}
}

TEST_CASE("Debian's flavour directories are found in a tree, current first, symlinks not followed", "[staging][flavours]")
{
	test::TempDir t;
	t.mkdir("tree/nvidia/tesla-535");
	t.mkdir("tree/nvidia/current");
	t.mkdir("tree/nvidia/tesla-470");
	t.mkdir("elsewhere");
	t.link(t / "elsewhere", "tree/nvidia/linked");
	t.write("tree/nvidia/libnvidia-cfg.so.1", "");
	UniqueFd tree(::open((t / "tree").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	REQUIRE(tree.valid());
	CHECK(staging_layout::flavours(tree.get()) == std::vector<std::string>{"current", "tesla-470", "tesla-535"});
	CHECK(staging_layout::scan_dirs(tree.get()) ==
	      std::vector<std::string>{"", "nvidia/current", "nvidia/tesla-470", "nvidia/tesla-535", "vdpau", "nvidia/current/vdpau",
				       "nvidia/tesla-470/vdpau", "nvidia/tesla-535/vdpau", "bin"});
	const auto watched = staging_layout::watched_dirs(tree.get());
	CHECK(std::find(watched.begin(), watched.end(), "nvidia") != watched.end());

	test::TempDir plain;
	UniqueFd none(::open(plain.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	CHECK(staging_layout::scan_dirs(none.get()) == std::vector<std::string>{"", "vdpau", "bin"});
}

TEST_CASE("a link that leads outside the staging mounts says what to bind", "[staging][hint]")
{
	CHECK(bind_hint("/etc/alternatives/nvidia--nvidia-smi").find("/usr/lib/nvidia/current") != std::string::npos);
	CHECK(bind_hint("/etc/alternatives/nvidia--libnvidia-nvvm.so.535.261.03-x86_64-linux-gnu").find("/usr/lib/x86_64-linux-gnu") !=
	      std::string::npos);
	CHECK(bind_hint("/etc/alternatives/nvidia--libcuda.so.1-i386-linux-gnu").find("/usr/lib/i386-linux-gnu") != std::string::npos);
	CHECK(bind_hint("/usr/lib/nvidia/current/nvidia-smi") == "bind the host's /usr/lib/nvidia/current");
	CHECK(bind_hint("/libcuda.so.1") == "bind the host's /");
}
