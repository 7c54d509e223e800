#include "cdi_spec.hpp"
#include "yaml_reference.hpp"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

TEST_CASE("the fast scalar writer writes exactly what yaml-cpp writes", "[yaml]")
{
	const std::string scalars[] = {
		// a CDI spec's keys and values
		"cdiVersion", "0.5.0", "nvidia.com/gpu", "0", "all", "/dev/nvidia0", "rwm", "A=b", "NVIDIA_CTK_LIBCUDA_DIR=/lib/x86_64-linux-gnu",
		"NVIDIA_VISIBLE_DEVICES=void", "createContainer", "/usr/bin/nvidia-cdi-hook", "nvidia-cdi-hook", "create-symlinks",
		"libcuda.so.1::/lib/x86_64-linux-gnu/libcuda.so", "--host-driver-version=535.1",
		"/run/nvidia/driver/lib/x/libcuda.so.535.104.05", "ro", "rprivate", "containerEdits",
		// Scalars that need quoting or escaping go through yaml-cpp itself.
		"has: colon-space", "#comment", "- dash", "", "line\nbreak", "tab\there", "quote\"s", "yes", "null", "~", " lead", "trail ",
		"*alias", "&anchor", "!tag", "{flow}", "[seq]", "%pct", "@at", "`tick", "123", "12.5", "ünïcode", "1:0", "12:34", "1:2: x",
		"1:\"q",
		// Relative link targets (create-symlinks) take the fast path: yaml-cpp writes them plain too.
		"../card1::/dev/dri/by-path/pci-0000:18:00.0-card", "./x", "../a: b", "..", ".inf", "../#x", "./", "../x y", "--link", "---",
		"--", "-x", "--a b", "--x: y"};
	for (const auto &s : scalars) {
		INFO(s);
		std::string fast;
		unbounded::append_yaml_string(fast, s);
		CHECK(fast == yaml_reference::scalar(s));
		// and a YAML reader gets the string back unchanged
		CHECK(YAML::Load("k: " + fast)["k"].as<std::string>() == s);
	}
	// a MIG device name is not the base-60 number a YAML 1.1 reader would make of it
	std::string mig;
	unbounded::append_yaml_string(mig, "1:0");
	CHECK(mig == "\"1:0\"");
}
