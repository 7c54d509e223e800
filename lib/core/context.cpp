#include "context.hpp"

#include <cstdlib>

namespace unbounded {
namespace {

// One spelling per root: empty and "." components dropped, so that "//", "/./" and "/tmp/r/" are "/"
// and "/tmp/r". ".." is kept (the kernel resolves it after any symlink before it, a string cannot)
// but right after "/", whose ".." is "/" itself.
std::string normal_root(std::string_view root)
{
	std::string out = root.starts_with('/') ? "/" : "";
	for (const auto &part : fs::split_path(root)) {
		if (part == "." || (part == ".." && out == "/"))
			continue;
		if (!out.empty() && out.back() != '/')
			out += '/';
		out += part;
	}
	return out.empty() ? "." : out;
}

}  // namespace

std::string effective_root(const std::string &flag_value)
{
	std::string root = flag_value;
	if (root.empty())
		if (const char *e = std::getenv("UNBOUNDED_NVIDIA_ROOT"); e && *e)
			root = e;
	if (root.empty())
		return {};
	root = normal_root(root);
	return root == "/" ? std::string{} : root;  // "/" however written is this system: its service manager too
}

}  // namespace unbounded
