// The first line that makes a spec ours (spec_marker.hpp): what removal trusts. Contract: a file is
// ours exactly when its text starts with the marker, and the file check (the first 128 bytes of a
// regular file) agrees; the marker line we write round-trips: any text after it is ours, by text
// and by file.
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

	const std::string written = spec_marker_line() + std::string(text);
	FUZZ_REQUIRE(is_our_spec(written), spec_marker_line());
	fuzz::write_file(path, written);
	FUZZ_REQUIRE(file_is_our_spec(path), spec_marker_line());
	return 0;
}
