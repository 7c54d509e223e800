// What every command needs: the --root prefix and the configuration. All absolute paths the programs
// touch go through real(), so tests and offline image builds can point everything at a fake root.
#pragma once

#include "config.hpp"
#include "fs.hpp"

#include <string>
#include <string_view>

namespace unbounded {

struct Context {
	std::string root;  // "" for the live system
	Config config;

	std::string real(std::string_view absolute) const { return fs::root_path(root, absolute); }
};

// Root from --root, else $UNBOUNDED_NVIDIA_ROOT, else "", without empty or "." components or a
// trailing '/': "/" however written ("//", "/./", "/..") is "", the live system.
std::string effective_root(const std::string &flag_value);

}  // namespace unbounded
