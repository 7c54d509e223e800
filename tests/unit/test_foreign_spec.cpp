// A file not ours in a CDI spec directory, judged one-sidedly (lib/consumer/foreign_spec.hpp): the
// kinds it names in any spelling Go's decoding takes, what may crash the library, and what verify
// cannot read. The real library holds these rules in tests/oracle/.
#include "foreign_spec.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;
using Verdict = ForeignSpec::Verdict;

namespace {

ForeignSpec judge(const std::string &text) { return judge_foreign_spec(text, "/var/run/cdi/x.yaml"); }

}  // namespace

TEST_CASE("every key Go takes as the kind field names a kind", "[foreign-spec]")
{
	const std::string gpu = "nvidia.com/gpu";
	for (const std::string text : {"kind: nvidia.com/gpu\n", "Kind: nvidia.com/gpu\n", "KIND: 'nvidia.com/gpu'\n",
				       "\xe2\x84\xaaind: nvidia.com/gpu\n", R"({"kInD": "nvidia.com/gpu", "devices": []})",
				       R"({"\u212aind": "nvidia.com/gpu"})", "kind: >-\n  nvidia.com/gpu\n"}) {
		INFO(text);
		const auto v = judge(text);
		CHECK(v.verdict == Verdict::Read);
		CHECK(v.kinds == std::set<std::string>{gpu});
	}
	// Two spellings, two kinds: which the decoder keeps is its business, both are named.
	CHECK(judge("kind: example.com/fpga\nKind: nvidia.com/gpu\n").kinds == std::set<std::string>{"example.com/fpga", gpu});
	// Not the kind field: nested, another key, not a string.
	for (const std::string text : {"devices:\n- kind: nvidia.com/gpu\n", "kinds: nvidia.com/gpu\n", "kind: [nvidia.com/gpu]\n",
				       "[kind, nvidia.com/gpu]\n", "", "just text\n"}) {
		INFO(text);
		CHECK(judge(text).verdict == Verdict::Read);
		CHECK(judge(text).kinds.empty());
	}
}

TEST_CASE("what may crash the library: a null device node, mount or hook, a one-letter vendor or class", "[foreign-spec]")
{
	for (const std::string text : {"kind: a.com/gpu\ncontainerEdits:\n  mounts: [null]\n",
				       "devices:\n- name: x\n  containerEdits:\n    deviceNodes:\n    - ~\n",
				       R"({"containerEdits": {"HOOKS": [{"hookName": "prestart"}, null]}})",
				       "containerEdits:\n  mount\xc5\xbf: [null]\n", "kind: n/gpu\n", "kind: nvidia.com/g\n", "kind: x\n"}) {
		INFO(text);
		const auto v = judge(text);
		CHECK(v.verdict == Verdict::Crashes);
		CHECK(v.kinds.empty());
	}
	CHECK_THAT(judge("kind: n/gpu\n").reason, Catch::Contains("one-letter vendor or class in kind 'n/gpu'"));
	CHECK_THAT(judge("containerEdits: {mounts: [null]}\n").reason, Catch::Contains("a null mount"));
	// A null elsewhere is only a spec the library refuses.
	for (const std::string text : {"devices: [null]\nkind: nvidia.com/gpu\n", "containerEdits: {env: [null]}\n", "kind: 1/gpu\n"})
		CHECK(judge(text).verdict == Verdict::Read);
}

TEST_CASE("what verify cannot read is said, not passed", "[foreign-spec]")
{
	const std::pair<std::string, const char *> cases[] = {
		{"kind: !!binary bnZpZGlhLmNvbS9ncHU=\n", "a YAML tag"},
		{"<<: {kind: nvidia.com/gpu}\n", "a YAML merge key"},
		{"a: &a x\nkind: *a\n", "YAML aliases"},
		{"kind: [" + std::string(40, '[') + "\n", "nested or indented deeper"},
		{R"({"kind": )" + std::string(40, '['), "nested deeper than 32"},
		{"kind: nvidia.com/gpu\na: b: c\n", "Failed to parse /var/run/cdi/x.yaml:2"},
	};
	for (const auto &[text, why] : cases) {
		INFO(text);
		const auto v = judge(text);
		CHECK(v.verdict == Verdict::Unreadable);
		CHECK_THAT(v.reason, Catch::Contains(why));
	}
	// Line breaks go-yaml reads and yaml-cpp and JSON do not: the kind after one is hidden from us.
	const std::string body = "cdiVersion: 0.5.0\ndevices:\n- name: \"0\"\n";
	for (const std::string &text : {body + "kind: nvidia.com/gpu\xc2\x85", body + "# c\xc2\x85kind: nvidia.com/gpu\n",
					body + "# c\xe2\x80\xa8kind: nvidia.com/gpu\n", body + "# c\xe2\x80\xa9kind: nvidia.com/gpu\n",
					body + "# c\rkind: nvidia.com/gpu\n",
					std::string(R"({"cdiVersion":"0.5.0",)") + "\xc2\x85" + R"("kind":"nvidia.com/gpu"})"}) {
		INFO(text);
		const auto v = judge(text);
		CHECK(v.verdict == Verdict::Unreadable);
		CHECK_THAT(v.reason, Catch::Contains("lone CR, NEL, LS or PS"));
	}
	CHECK(judge(body + "kind: nvidia.com/gpu\r\n# c\r\n").kinds == std::set<std::string>{"nvidia.com/gpu"});  // CRLF is a line break to both
	// A list, however deep, is no spec to Go's decoding.
	CHECK(judge(std::string(100000, '[')).verdict == Verdict::Read);
}

TEST_CASE("the library reads every .json and .yaml name, dot-files too", "[foreign-spec]")
{
	for (const char *name : {"a.json", "a.yaml", ".json", ".x.yaml"})
		CHECK(cdi_library_reads(name));
	for (const char *name : {"a.yml", "a.json~", "a.YAML", "json", "a.conf"})
		CHECK_FALSE(cdi_library_reads(name));
}
