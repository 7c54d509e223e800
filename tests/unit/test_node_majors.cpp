// The numbers GPU, control and DRM nodes must have: the majors from /proc/devices,
// the fixed ones where it does not name the driver, and the minors DRM names imply.
#include "node_majors.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

namespace {

NodeMajors majors_of(const test::TempDir &t, const char *proc_devices)
{
	if (proc_devices)
		t.write("proc/devices", proc_devices);
	Context ctx;
	ctx.root = t.path();
	CharMajors cm(ctx);
	return NodeMajors::from(cm);
}

}  // namespace

TEST_CASE("node majors: /proc/devices first, the fixed numbers where it does not name the driver", "[nodes]")
{
	{
		test::TempDir t;
		auto m = majors_of(t, "Character devices:\n  1 mem\n195 nvidia-frontend\n226 drm\n509 nvidia-uvm\n");
		CHECK(m.nvidia == 195u);
		CHECK(m.uvm == 509u);
		CHECK(m.drm == 226u);
		CHECK_FALSE(m.uvm_unchecked);
	}
	{
		test::TempDir t;  // the open modules' name; no drm loaded; uvm only as a block device
		auto m = majors_of(t, "Character devices:\n200 nvidia\n\nBlock devices:\n509 nvidia-uvm\n");
		CHECK(m.nvidia == 200u);
		CHECK(m.drm == 226u);
		CHECK_FALSE(m.uvm.has_value());
		CHECK_FALSE(m.uvm_unchecked);
	}
	{
		test::TempDir t;  // 195 and 226 held by other drivers: no node of them is the NVIDIA or DRM driver's
		auto m = majors_of(t, "Character devices:\n195 other\n226 another\n");
		CHECK_FALSE(m.nvidia.has_value());
		CHECK_FALSE(m.drm.has_value());
	}
	{
		test::TempDir t;  // no /proc/devices: a fake or offline root
		auto m = majors_of(t, nullptr);
		CHECK(m.nvidia == 195u);
		CHECK(m.drm == 226u);
		CHECK_FALSE(m.uvm.has_value());
		CHECK(m.uvm_unchecked);
	}
}

TEST_CASE("DRM names: the minor card<N> and renderD<N> imply", "[nodes]")
{
	CHECK(drm_minor("card0") == 0u);
	CHECK(drm_minor("card1") == 1u);
	CHECK(drm_minor("renderD128") == 128u);
	CHECK_FALSE(drm_minor("card").has_value());
	CHECK_FALSE(drm_minor("card01").has_value());
	CHECK_FALSE(drm_minor("card1-HDMI-A-1").has_value());
	CHECK_FALSE(drm_minor("renderD").has_value());
	CHECK_FALSE(drm_minor("controlD64").has_value());
	CHECK_FALSE(drm_minor("card99999").has_value());
}
