// What the CDI library (tags.cncf.io/container-device-interface, which containerd, CRI-O and podman
// link) makes of one spec file, by its own rules, so that verify's "shadowed or not" is the library's:
// every file whose name ends in .json or .yaml (a leading dot included) is decoded as YAML, strictly
// (a key set twice, or one no field of the spec takes, refuses the spec), field names matched without
// regard to case as Go's JSON decoding matches them, plain scalars resolved by YAML 1.1 and written
// back as text (go_yaml_plain_string); then the spec is validated (its cdiVersion known to that
// library release and at least what its fields need, its kind, each device's name and edits) and
// refused whole when any of that fails. Facts: the library's pkg/cdi (spec.go, cache.go,
// spec-dirs.go), specs-go/version.go, sigs.k8s.io/yaml; checked against the real library by
// tests/oracle/.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

namespace unbounded {

// What the consumer check takes from a spec the library reads: its kind, cdiVersion and device names.
struct SpecFacts {
	std::string kind, cdi_version;
	std::set<std::string> devices;
};

struct LibraryVerdict {
	enum class Status {
		Read,      // the library takes the spec and its devices
		Refused,   // the library skips the whole file (and so must we)
		Unjudged,  // past what verify parses (a limit, an alias, a tag): the library may read it
		Crashes,   // the library panics on it (a null device node, mount or hook; a one-letter
			   // vendor or class): the runtime that refreshes its CDI cache goes down with it
	} status = Status::Refused;
	std::string reason;               // why refused or unjudged, one line
	SpecFacts facts;                  // when Read
	nlohmann::ordered_json document;  // when Read: the spec as decoded, for the caller's own checks
};

// Whether the library's directory walk reads a file of this name (Go's filepath.Ext).
bool cdi_library_reads(std::string_view name);

// `max_version`: the newest cdiVersion the library release accepts ("" when unknown: the newest this
// check knows).
LibraryVerdict judge_spec(std::string_view text, const std::string &path, std::string_view max_version);

}  // namespace unbounded
