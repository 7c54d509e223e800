#include "yaml_emit.hpp"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

using namespace unbounded;
using nlohmann::ordered_json;

TEST_CASE("the fast emitter writes exactly what yaml-cpp writes", "[yaml]")
{
	const ordered_json docs[] = {
		ordered_json::parse(R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":
			{"deviceNodes":[{"path":"/dev/nvidia0","major":195,"fileMode":438,"permissions":"rwm"}]}},
			{"name":"all","containerEdits":{"env":["A=b"]}}],
			"containerEdits":{"env":["NVIDIA_CTK_LIBCUDA_DIR=/lib/x86_64-linux-gnu","NVIDIA_VISIBLE_DEVICES=void"],
			"hooks":[{"hookName":"createContainer","path":"/usr/bin/nvidia-cdi-hook","args":["nvidia-cdi-hook",
			"create-symlinks","--link","libcuda.so.1::/lib/x86_64-linux-gnu/libcuda.so","--host-driver-version=535.1"]}],
			"mounts":[{"hostPath":"/run/nvidia/driver/lib/x/libcuda.so.535.104.05","containerPath":"/lib/x/libcuda.so.535.104.05",
			"options":["ro","nosuid","nodev","rbind","rprivate"]}],"additionalGids":[44, 45]}})"),
		// Scalars that need quoting or escaping go through yaml-cpp itself.
		ordered_json::parse(R"({"a":"has: colon-space","b":"#comment","c":"- dash","d":"","e":"line\nbreak","f":"tab\there",
			"g":"quote\"s","h":"yes","i":"null","j":"~","k":" lead","l":"trail ","m":"*alias","n":"&anchor","o":"!tag",
			"p":"{flow}","q":"[seq]","r":"%pct","s":"@at","t":"`tick","u":"123","v":"12.5","w":"ünïcode","x":[[1,2],[]],
			"y":{},"z":[{"k":{"deep":[1]}}],"mig":"1:0","mig2":"12:34","time":"1:2: x","v2":"1:\"q"})"),
		// Relative link targets (create-symlinks) take the fast path: yaml-cpp writes them plain too.
		ordered_json::parse(R"({"a":"../card1::/dev/dri/by-path/pci-0000:18:00.0-card","b":"./x","c":"../a: b","d":"..",
			"e":".inf","f":"../#x","g":"./","h":"../x y","i":"--link","j":"--host-driver-version=535.1","k":"---","l":"--",
			"m":"-x","n":"--a b","o":"--x: y"})"),
	};
	for (const auto &d : docs) {
		INFO(d.dump());
		CHECK(emit_block_yaml(d) == emit_block_yaml_reference(d));
		// a MIG device name is not the base-60 number a YAML 1.1 reader would make of it
		CHECK(emit_block_yaml(ordered_json{{"name", "1:0"}}) == "---\nname: \"1:0\"\n");
		// and a YAML reader gets the strings back unchanged
		YAML::Node n = YAML::Load(emit_block_yaml(d));
		for (auto it = d.begin(); it != d.end(); ++it)
			if (it.value().is_string())
				CHECK(n[it.key()].as<std::string>() == it.value().get<std::string>());
	}
}
