#include "driver_generation.hpp"

#include "temp_dir.hpp"
#include "unique_fd.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <fstream>

using namespace unbounded;
using unbounded::test::TempDir;

namespace {

UniqueFd open_dir(const std::string &path)
{
	return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

}  // namespace

TEST_CASE("a generation moves only when what consumers see changes", "[consumers]")
{
	TempDir tmp;
	auto dir = open_dir(tmp.path());
	CHECK_FALSE(read_driver_generation(dir.get()).value());
	const Advanced a = next_generation(std::nullopt, view_digest({"535", "spec"}), "535", 100);
	CHECK(a.changed);
	CHECK(a.current.generation == 1);
	const Advanced same = next_generation(a.current, view_digest({"535", "spec"}), "535", 200);
	CHECK_FALSE(same.changed);
	CHECK(same.current.changed_at_ns == 100);
	const Advanced next = next_generation(same.current, view_digest({"550", "spec"}), "550", 300);
	CHECK(next.changed);
	CHECK(next.current.generation == 2);
	std::ofstream(tmp.path() + "/driver-generation.json") << generation_json(next.current);
	CHECK(read_driver_generation(dir.get()).value()->driver_version == "550");
	CHECK(read_driver_generation(dir.get()).value()->changed_at_ns == 300);
	// The parts are told apart: "ab","c" is not "a","bc".
	CHECK(view_digest({"ab", "c"}) != view_digest({"a", "bc"}));
	// The digest of a view is the same from one release to the next: a package upgraded while the
	// machine runs must not take the same specs for a change and restart the consumers.
	CHECK(view_digest({"535", "spec"}) == "7c26bb180bf72f3e");
	CHECK(view_digest({"535.104.05", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n", "", "nvidia.com/nvswitch\nx"}) == "ec66edc4dd333580");
}

TEST_CASE("consumers are pending for a later generation until a finished record covers it", "[consumers]")
{
	DriverGeneration g{1, "v", "535", 1};
	CHECK_FALSE(consumers_pending(g, std::nullopt));  // the boot's first: every container starts after it
	g.generation = 2;
	CHECK(consumers_pending(g, std::nullopt));
	ConsumersRecord r;
	r.generation = 2;
	CHECK(consumers_pending(g, r));  // under way
	r.finished = true;
	CHECK_FALSE(consumers_pending(g, r));
	g.generation = 3;
	CHECK(consumers_pending(g, r));
}

TEST_CASE("the consumers record keeps what was restarted and a newer format is refused", "[consumers]")
{
	TempDir tmp;
	auto dir = open_dir(tmp.path());
	ConsumersRecord r;
	r.generation = 4;
	r.finished = true;
	r.consumers.push_back({"kube-system", "nvdp-x", "uid-1", "nvidia-device-plugin-ctr", "app=x", "restarted", ""});
	r.counts.emplace_back("nvidia-device-plugin-ctr\trestarted", 3);
	std::ofstream(tmp.path() + "/consumers.json") << consumers_record_json(r);
	auto back = read_consumers_record(dir.get());
	REQUIRE(back);
	REQUIRE(*back);
	CHECK((*back)->generation == 4);
	CHECK((*back)->consumers.at(0).pod_uid == "uid-1");
	CHECK((*back)->counts.at(0).second == 3);
	std::ofstream(tmp.path() + "/consumers.json") << R"({"format": 2, "generation": 9})";
	auto newer = read_consumers_record(dir.get());
	REQUIRE_FALSE(newer);
	CHECK_THAT(newer.error().message, Catch::Contains("written by a newer release"));
}
