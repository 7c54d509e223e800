// nvidia-cdi-hook --help (urfave/cli's text). Contract: only plain command names (what a spec may
// name as the hook's first argument: [A-Za-z0-9_-], 1 to 64 bytes) come out.
#define FUZZ_NAME "hook_help"
#include "fuzz_target.hpp"

#include "cdi_hook.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	for (const auto &c : parse_hook_help(text)) {
		FUZZ_REQUIRE(!c.empty() && c.size() <= 64, c);
		for (char ch : c)
			FUZZ_REQUIRE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_', c);
	}
	return 0;
}
