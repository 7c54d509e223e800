// What nvidia-cdi-hook --help says it can do.
#include "cdi_hook.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("the COMMANDS section of urfave/cli's help, and nothing else", "[cdi]")
{
	const char *help_1_17 = "NAME:\n   NVIDIA CDI Hook - Command to structure files for usage inside a container\n\n"
				"USAGE:\n   nvidia-cdi-hook [global options] command [command options]\n\n"
				"VERSION:\n   1.17.8\n\nCOMMANDS:\n"
				"   enable-cuda-compat  This hook makes CUDA Forward Compatibility libraries available\n"
				"   update-ldcache      Update ldcache in a container by running ldconfig\n"
				"   create-symlinks     A hook to create symlinks in the container.\n"
				"   chmod               Set the permissions of folders in the container\n"
				"   help, h             Shows a list of commands or help for one command\n\n"
				"GLOBAL OPTIONS:\n   --debug, -d    Enable debug-level logging (default: false)\n   --help, -h     show help\n";
	CHECK(parse_hook_help(help_1_17) ==
	      std::set<std::string>{"chmod", "create-symlinks", "enable-cuda-compat", "update-ldcache"});
	CHECK(parse_hook_help("").empty());
	CHECK(parse_hook_help("COMMANDS:\n   ok-name  x\n   bad$name  y\n   \x01\n").size() == 1);
	CHECK(parse_hook_help("Usage: something else\n   create-symlinks\n").empty());  // no COMMANDS: section
}
