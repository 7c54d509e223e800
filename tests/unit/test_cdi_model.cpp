// The CDI model every writer and judge of a spec asks (lib/cdi/cdi_model.hpp).
#include "cdi_model.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("the versions the specification knows, compared as numbers", "[cdi-model]")
{
	for (const char *v : {"0.1.0", "0.3.0", "0.5.0", "0.8.0", "1.0.0", "1.1.0"})
		CHECK(known_cdi_version(v));
	for (const char *v : {"", "0.9.0", "v0.5.0", "1.1", "1.2.0"})
		CHECK_FALSE(known_cdi_version(v));
	CHECK(known_cdi_version(CDI_NEWEST_VERSION));
	CHECK(compare_cdi_versions("0.7.0", "0.6.0") > 0);
	CHECK(compare_cdi_versions("0.5.0", "0.5.0") == 0);
	CHECK(compare_cdi_versions("0.10.0", "1.0.0") < 0);
}

TEST_CASE("the lowest cdiVersion is the newest a used feature needs, and names it", "[cdi-model]")
{
	CdiVersionNeed none;
	CHECK(none.version() == "0.3.0");
	CHECK(none.why().empty());
	CdiVersionNeed n;
	n.add(CdiFeature::MountType);
	CHECK(n.version() == "0.4.0");
	n.add(CdiFeature::DigitFirstName);
	n.add(CdiFeature::DeviceNodeHostPath);  // the same version: the first reason stays
	CHECK(n.version() == "0.5.0");
	CHECK(n.why() == "device names starting with a digit");
	n.add(CdiFeature::AdditionalGids);
	n.add(CdiFeature::Annotations);  // older: no change
	CHECK(n.version() == "0.7.0");
	CHECK(n.why() == "additionalGids");
	n.add(CdiFeature::NetDevices);
	CHECK(n.version() == "1.1.0");
	CdiVersionNeed dot;
	dot.add(CdiFeature::DotInClass);
	CHECK(dot.version() == "0.6.0");
	CdiVersionNeed rdt;
	rdt.add(CdiFeature::IntelRdt);
	CHECK(rdt.version() == "0.7.0");
}

TEST_CASE("vendor, class and device names as the library's parser takes them", "[cdi-model]")
{
	CHECK(valid_cdi_name("nvidia.com", false));
	CHECK(valid_cdi_name("gpu", false));
	CHECK(valid_cdi_name("a_b-c.d", false));
	CHECK_FALSE(valid_cdi_name("", false));
	CHECK_FALSE(valid_cdi_name("0gpu", false));  // a vendor or class starts with a letter
	CHECK_FALSE(valid_cdi_name("gpu-", false));  // and ends with a letter or digit
	CHECK_FALSE(valid_cdi_name("g:pu", false));  // ':' only in device names
	CHECK_FALSE(valid_cdi_name("g/pu", false));
	CHECK(valid_cdi_name("0", true));
	CHECK(valid_cdi_name("GPU-3f1c:0", true));
	CHECK(valid_cdi_name("all", true));
	CHECK_FALSE(valid_cdi_name("-0", true));
	CHECK_FALSE(valid_cdi_name("0_", true));
	CHECK_FALSE(valid_cdi_name("a b", true));
}

TEST_CASE("the cdiVersion each runtime release accepts, and the first containerd for a version", "[cdi-model]")
{
	CHECK(max_cdi_version_for_containerd(1, 6, 20) == "");
	CHECK(max_cdi_version_for_containerd(1, 7, 0) == "0.5.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 11) == "0.5.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 12) == "0.6.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 15) == "0.6.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 16) == "0.7.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 26) == "0.7.0");
	CHECK(max_cdi_version_for_containerd(1, 7, 27) == "0.8.0");
	CHECK(max_cdi_version_for_containerd(1, 8, 0) == "0.8.0");
	CHECK(max_cdi_version_for_containerd(2, 0, 4) == "0.8.0");
	CHECK(max_cdi_version_for_containerd(2, 0, 5) == "1.0.0");
	CHECK(max_cdi_version_for_containerd(2, 1, 9) == "1.0.0");
	CHECK(max_cdi_version_for_containerd(2, 2, 0) == "1.0.0");
	CHECK(max_cdi_version_for_containerd(2, 2, 1) == "1.1.0");
	CHECK(max_cdi_version_for_containerd(3, 0, 0) == "1.1.0");
	// The inverse comes from the same table: every release from the one named on accepts it.
	CHECK(first_containerd_for("0.3.0") == "1.7.0");
	CHECK(first_containerd_for("0.5.0") == "1.7.0");
	CHECK(first_containerd_for("0.6.0") == "1.7.12");
	CHECK(first_containerd_for("0.7.0") == "1.7.16");
	CHECK(first_containerd_for("0.8.0") == "1.7.27");
	CHECK(first_containerd_for("1.0.0") == "2.0.5");
	CHECK(first_containerd_for("1.1.0") == "2.2.1");
	CHECK(first_containerd_for("1.2.0") == "");  // newer than any release this model knows
	for (const char *v : {"0.3.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"}) {
		const std::string first = first_containerd_for(v);
		int major = 0, minor = 0, patch = 0;
		REQUIRE(std::sscanf(first.c_str(), "%d.%d.%d", &major, &minor, &patch) == 3);
		CHECK(compare_cdi_versions(max_cdi_version_for_containerd(major, minor, patch), v) >= 0);
	}
	CHECK(max_cdi_version_for_crio(1, 33) == "");
	CHECK(max_cdi_version_for_crio(1, 34) == "1.0.0");
	CHECK(max_cdi_version_for_crio(1, 35) == "1.1.0");
	CHECK(max_cdi_version_for_crio(2, 0) == "1.1.0");
}

TEST_CASE("the cdiVersion a CDI library release accepts, from its Debian or upstream version", "[cdi-model]")
{
	CHECK(max_cdi_version_for_library("0.8.0-5") == "0.8.0");
	CHECK(max_cdi_version_for_library("1.0.1-2") == "1.0.0");
	CHECK(max_cdi_version_for_library("v0.5.4") == "0.5.0");
	CHECK(max_cdi_version_for_library("0.6.0+ds-1") == "0.6.0");
	CHECK(max_cdi_version_for_library("1.1.0-1") == "1.1.0");
	CHECK(max_cdi_version_for_library("1:0.8.0-1") == "0.8.0");            // an epoch
	CHECK(max_cdi_version_for_library("0.8.0+really0.7.0-1") == "0.7.0");  // a downgrade, as Debian spells it
	CHECK(max_cdi_version_for_library("0.4.1-1") == "");                   // older than the CDI containerd knows
	CHECK(max_cdi_version_for_library("1") == "");
	CHECK(max_cdi_version_for_library("x.y") == "");
	CHECK(max_cdi_version_for_library("") == "");
}

TEST_CASE("the library panics on a vendor or class of one letter", "[cdi-model]")
{
	for (const char *kind : {"n/gpu", "nvidia.com/g", "x", "X/y"})
		CHECK(cdi_kind_panics(kind));
	for (const char *kind : {"nvidia.com/gpu", "1/gpu", "/g", "n/", "ab/cd", ""})
		CHECK_FALSE(cdi_kind_panics(kind));
}
