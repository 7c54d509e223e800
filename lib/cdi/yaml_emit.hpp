// String scalars of block-style YAML, byte-identical to what yaml-cpp's Emitter writes (a unit test
// holds the two equal). yaml-cpp decides for every scalar whether it may be written plain by running a
// regular-expression engine, about 28,000 instructions a scalar and 80 % of generating a CDI spec;
// here scalars drawn from the characters of paths, names and options are checked directly and
// anything else is handed to yaml-cpp, which quotes and escapes it.
#pragma once

#include <string>

namespace unbounded {

// One string scalar, for writers that stream a document of a known shape (the CDI spec). Strings
// made only of digits, and "<digit>...:..." (a MIG device name), are double-quoted, so "0" stays a
// string for every YAML reader.
void append_yaml_string(std::string &out, const std::string &s);

}  // namespace unbounded
