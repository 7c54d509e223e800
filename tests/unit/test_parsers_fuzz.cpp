// Property tests over a mutated corpus, for the parsers that read files an operator or another
// program wrote: the config, the manifest, CDI specs (YAML and JSON). Each mutated input must give a
// value or an error of one printable line with the exit code the README names; a manifest that
// parses round-trips. The coverage-guided search for inputs is the fuzz tier's (fuzz/README.md);
// these run the same contracts in every build, with a fixed seed.
#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "config.hpp"
#include "manifest.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <random>

using namespace unbounded;

namespace {

std::string mutate(const std::string &seed, std::mt19937 &rng)
{
	static const std::string tokens[] = {"{", "}", "[", "]", ":", ",", "- ", "\n  ", "&a ", "*a", "!!binary ", "\"", "'",
					     "\\u0000", "%YAML 1.2\n", "? ", "|\n", ">\n", "\t", "#", std::string(64, '['),
					     "1e999", "-0", "null", "~", "\xff\xfe"};
	std::string s = seed;
	std::uniform_int_distribution<int> ops(1, 6);
	for (int i = ops(rng); i > 0 && !s.empty(); i--) {
		std::uniform_int_distribution<std::size_t> pos(0, s.size() - 1);
		switch (rng() % 4) {
		case 0: s[pos(rng)] = static_cast<char>(rng() % 256); break;
		case 1: s.erase(pos(rng), rng() % 64); break;
		case 2: s.insert(pos(rng), tokens[rng() % std::size(tokens)]); break;
		default: s.resize(pos(rng)); break;
		}
	}
	return s;
}

const std::string CONFIG_SEED = R"(enabled: auto
staging: /run/host-nvidia
driver_root: /run/nvidia/driver
staging_timeout: 30s
licensing:
  source_dir: /run/host-nvidia-licensing
  legacy_files:
    gridd_conf: /drivers/gridd.conf
  jitter: 60s
)";

const std::string SPEC_SEED = R"(---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          major: 195
          fileMode: 438
          permissions: rwm
containerEdits:
  env:
    - NVIDIA_VISIBLE_DEVICES=void
  mounts:
    - hostPath: /run/nvidia/driver/lib/x86_64-linux-gnu/libcuda.so.535.104.05
      containerPath: /lib/x86_64-linux-gnu/libcuda.so.535.104.05
      options: [ro, nosuid, nodev, rbind, rprivate]
)";

const std::string JSON_SEED = R"({"cdiVersion":"0.5.0","kind":"k8s.device-plugin.nvidia.com/gpu","devices":[{"name":"GPU-0",
"containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0","hostPath":"/dev/nvidia0"}]}}],"containerEdits":{"mounts":[
{"hostPath":"/run/nvidia/driver/lib/x86_64-linux-gnu/libcuda.so.535.104.05","containerPath":"/lib/x","options":["ro"]}]}})";

bool one_printable_line(const std::string &s)
{
	return !s.empty() && s.find('\n') == std::string::npos && is_printable(s);
}

}  // namespace

TEST_CASE("a mutated config gives a config or one printable line with exit 2", "[property]")
{
	std::mt19937 rng(1);
	for (int i = 0; i < 3000; i++) {
		auto r = parse_config(mutate(CONFIG_SEED, rng), "f.yaml");
		if (!r) {
			CHECK(r.error().exit_code == EXIT_USAGE);
			CHECK(one_printable_line(r.error().message));
		}
	}
}

TEST_CASE("the CDI spec checks of mutated YAML and JSON say each problem in one printable line", "[property]")
{
	std::mt19937 rng(2);
	for (int i = 0; i < 3000; i++) {
		for (const std::string *seed : {&SPEC_SEED, &JSON_SEED}) {
			auto doc = parse_yaml_bounded(mutate(*seed, rng), "spec");
			if (!doc) {
				CHECK(one_printable_line(doc.error().message));
				continue;
			}
			std::vector<Problem> problems;
			check_cdi_structure(*doc, "spec", problems);
			check_core_mounts(*doc, "spec", "535.104.05", problems);
			for (const auto &p : problems)
				CHECK(one_printable_line(p.message));
		}
		auto j = nlohmann::ordered_json::parse(mutate(JSON_SEED, rng), nullptr, false);
		if (!j.is_discarded()) {
			std::vector<Problem> problems;
			check_cdi_structure(j, "spec", problems);
			for (const auto &p : problems)
				CHECK(one_printable_line(p.message));
		}
	}
}

TEST_CASE("a mutated manifest gives one printable line or a manifest that round-trips", "[property]")
{
	Manifest m;
	m.driver_version = "535.104.05";
	m.multiarch = "x86_64-linux-gnu";
	ManifestEntry e;
	e.path = "lib/x86_64-linux-gnu/libcuda.so.535.104.05";
	e.size = 10;
	e.source = "/run/host-nvidia/0/libcuda.so.535.104.05";
	e.source_id = "1:2";
	m.entries.push_back(e);
	const std::string seed = m.to_json();
	std::mt19937 rng(3);
	for (int i = 0; i < 3000; i++) {
		auto r = Manifest::from_json(mutate(seed, rng), "m");
		if (!r) {
			CHECK(one_printable_line(r.error().message));
			continue;
		}
		const std::string once = r->to_json();
		auto again = Manifest::from_json(once, "m");
		REQUIRE(again);
		CHECK(again->to_json() == once);
	}
}

TEST_CASE("valid specs pass the structure check and broken ones name the problem", "[cdi]")
{
	auto doc = parse_yaml_bounded(SPEC_SEED, "spec");
	REQUIRE(doc);
	std::vector<Problem> ok;
	check_cdi_structure(*doc, "spec", ok);
	CHECK(ok.empty());

	struct Case {
		std::string yaml, expect;
	};
	const Case cases[] = {
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n", "no devices"},
		{"cdiVersion: 0.4.0\nkind: nvidia.com/gpu\ndevices:\n  - name: \"0\"\n    containerEdits:\n      env: [A=b]\n",
		 "cdiVersion 0.4.0 is lower than device names starting with a digit requires"},
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: a\n    containerEdits: {}\n", "empty containerEdits"},
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\nbogus: 1\ndevices:\n  - name: a\n    containerEdits:\n      env: [A=b]\n",
		 "unknown field 'bogus'"},
		{"cdiVersion: 9.9.9\nkind: nvidia.com/gpu\ndevices:\n  - name: a\n    containerEdits:\n      env: [A=b]\n",
		 "unknown cdiVersion"},
		{"cdiVersion: 0.5.0\nkind: nvidia\ndevices:\n  - name: a\n    containerEdits:\n      env: [A=b]\n", "invalid kind"},
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: a\n    containerEdits:\n      mounts:\n        - hostPath: /x\n          containerPath: rel\n",
		 "containerPath of device 'a'.mounts[0] is not an absolute path"},
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: a\n    containerEdits:\n      hooks:\n        - hookName: atStart\n          path: /x\n",
		 "not a valid hook name"},
		{"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: a\n    containerEdits:\n      additionalGids: [44]\n",
		 "lower than additionalGids requires"},
	};
	for (const auto &c : cases) {
		INFO(test::one_line(c.yaml));
		auto d = parse_yaml_bounded(c.yaml, "spec");
		REQUIRE(d);
		std::vector<Problem> problems;
		check_cdi_structure(*d, "spec", problems);
		REQUIRE_FALSE(problems.empty());
		std::string all;
		for (const auto &p : problems)
			all += p.message + "|";
		CHECK_THAT(all, Catch::Contains(c.expect));
	}
}
