#include "version.hpp"

#include "build_config.h"
#include "build_commit.h"

#include <cstdio>

namespace unbounded {

void print_version(const char *program) { std::printf("%s %s (commit %s)\n", program, PROJECT_VERSION, BUILD_COMMIT); }

}  // namespace unbounded
