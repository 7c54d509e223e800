#include "context.hpp"

#include <cstdlib>

namespace unbounded {

std::string effective_root(const std::string &flag_value)
{
	if (!flag_value.empty())
		return flag_value;
	if (const char *e = std::getenv("UNBOUNDED_NVIDIA_ROOT"); e && *e)
		return e;
	return {};
}

}  // namespace unbounded
