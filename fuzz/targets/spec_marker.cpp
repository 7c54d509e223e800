// The first line that makes a spec ours (spec_marker.hpp): what removal trusts. Contract: a file is
// ours exactly when its text starts with the marker, and the text check agrees.
#define FUZZ_NAME "spec_marker"
#include "fuzz_target.hpp"

#include "spec_marker.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	const bool ours = is_our_spec(text);
	FUZZ_REQUIRE(ours == text.starts_with(SPEC_MARKER), std::string(text.substr(0, 80)));
	const std::string path = fuzz::scratch() + "/spec.yaml";
	fuzz::write_file(path, text);
	FUZZ_REQUIRE(file_is_our_spec(path) == ours, std::string(text.substr(0, 80)));
	return 0;
}
