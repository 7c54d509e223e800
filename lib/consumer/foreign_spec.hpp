// A spec file that is not ours, in a directory the container runtime's CDI library reads, judged
// one-sidedly: verify never models how the library decodes and validates it (that follows every
// release of the library, go-yaml and Go's JSON), only whether it could take one of our devices or
// bring the runtime down. The caller takes a file that names one of our kinds, in any spelling of the
// key the library's decoding accepts, as a conflict whatever else it holds; a file verify cannot read
// within its limits may be one. Both err toward "not ready", and only for files no healthy node has.
// Facts: the library's pkg/cdi (spec.go, cache.go, spec-dirs.go), sigs.k8s.io/yaml, Go's
// encoding/json field matching; held to the real library by tests/oracle/.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

namespace unbounded {

struct ForeignSpec {
	enum class Verdict {
		Read,        // nothing that crashes the library: it may serve or refuse it; `kinds` below
		Crashes,     // the library may panic on it (a null device node, mount or hook; a one-letter
			     // vendor or class): the runtime that refreshes its CDI cache goes down with it
		Unreadable,  // verify cannot read it (past its limits, or not YAML to yaml-cpp): it may be either
	} verdict = Verdict::Read;
	// Every string held by a key Go takes as the kind field, in any case or fold ("Kind", "\u212aind"):
	// the library's decoder picks one of them or refuses the file, and which is its business. A file
	// naming one of our kinds here may serve pods its devices instead of ours.
	std::set<std::string> kinds;
	std::string reason;               // why Crashes or Unreadable, one line
	nlohmann::ordered_json document;  // as read (Read), for the DRA claim check
};

// Whether the library's directory walk reads a file of this name (Go's filepath.Ext): dot-files
// and a bare ".json" too.
bool cdi_library_reads(std::string_view name);

ForeignSpec judge_foreign_spec(std::string_view text, const std::string &path);

}  // namespace unbounded
