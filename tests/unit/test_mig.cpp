// The three MIG parsers: /proc/devices, /proc/driver/nvidia-caps/mig-minors and the
// capabilities tree, plus the capability names and the order of device names.
#include "format.hpp"
#include "mig.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("/proc/devices: character majors only", "[mig]")
{
	const auto m = parse_proc_devices("Character devices:\n  1 mem\n195 nvidia-frontend\n237 nvidia-caps-imex-channels\n"
					  "508 nvidia-caps\n509 nvidia-uvm\n\nBlock devices:\n  7 loop\n510 nvidia-caps-block\n"
					  "259 blkext\n");
	CHECK(m.at("nvidia-caps") == 508);
	CHECK(m.at("nvidia-caps-imex-channels") == 237);
	CHECK(m.at("nvidia-frontend") == 195);
	CHECK(m.at("mem") == 1);
	CHECK_FALSE(m.count("loop"));  // a block device
	CHECK_FALSE(m.count("nvidia-caps-block"));
	CHECK(parse_proc_devices("195 nvidia-frontend\n").empty());  // no section header: nothing is known
	CHECK(parse_proc_devices("Character devices:\nx nvidia\n99999999999 big\n 12\n").empty());
}

TEST_CASE("mig-minors: every line a capability and a minor, the rest reported", "[mig]")
{
	std::vector<std::string> skipped;
	const auto m = parse_mig_minors("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu7/gi14/ci7/access 1082\n"
					"\ngpu0/gi1/access x\ngpu0/gi1/ci/access 5\ngpu0/gi1/cix/access 5\nfoo 6\ngpu0/gi1/access  7\n"
					"gpu0/gi1/access 7 8\ngpu0/gi2/other 9\n",
					"mig-minors", &skipped);
	CHECK(m.size() == 5);
	CHECK(m.at("config") == 1);
	CHECK(m.at("monitor") == 2);
	CHECK(m.at("gpu0/gi0/access") == 3);
	CHECK(m.at("gpu0/gi0/ci0/access") == 4);
	CHECK(m.at("gpu7/gi14/ci7/access") == 1082);
	REQUIRE(skipped.size() == 7);
	CHECK(skipped[0] == "mig-minors:7: minor 'x' is not a number");
	CHECK(skipped[1] == "mig-minors:8: unknown capability 'gpu0/gi1/ci/access'");
	CHECK(skipped[3] == "mig-minors:10: unknown capability 'foo'");
	CHECK(skipped[4] == "mig-minors:11: not 'NAME MINOR'");
	CHECK(skipped[6] == "mig-minors:13: unknown capability 'gpu0/gi2/other'");
	CHECK(parse_mig_minors("", "x").empty());
}

TEST_CASE("capability names as mig-minors spells them", "[mig]")
{
	CHECK(gi_capability(3, 7) == "gpu3/gi7/access");
	CHECK(ci_capability(3, 7, 0) == "gpu3/gi7/ci0/access");
}

TEST_CASE("the capabilities tree: GIs and CIs in numeric order, nothing else", "[mig]")
{
	test::TempDir t;
	const std::string caps = "proc/driver/nvidia/capabilities/gpu2/mig/";
	for (const char *rel : {"gi10/access", "gi10/ci1/access", "gi10/ci0/access", "gi9/access", "gi9/ci0/access", "gi3/access",
				"gix/access", "gi9/cix/access", "gi9/notes"})
		t.write(caps + rel, "DeviceFileMinor: 1\n");
	Context ctx;
	ctx.root = t.path();
	auto tree = read_mig_tree(ctx, 2);
	REQUIRE(tree);
	CHECK(tree->gpu_instances == std::vector<unsigned>{3, 9, 10});  // 3 has no CI: no device, but MIG is on
	CHECK(tree->compute_instances == std::vector<std::pair<unsigned, unsigned>>{{9, 0}, {10, 0}, {10, 1}});
	auto none = read_mig_tree(ctx, 0);  // a GPU without a tree: MIG off or unsupported
	REQUIRE(none);
	CHECK(none->gpu_instances.empty());
	CHECK(none->compute_instances.empty());
}

TEST_CASE("device names: indexes, then MIG indexes, numerically", "[mig]")
{
	std::vector<std::string> names{"all", "1:10", "GPU-x", "10", "1:2", "2", "1", "0:0", "MIG-x", "1:0"};
	std::sort(names.begin(), names.end(), numeric_name_less);
	CHECK(names == std::vector<std::string>{"0:0", "1", "1:0", "1:2", "1:10", "2", "10", "GPU-x", "MIG-x", "all"});
}
