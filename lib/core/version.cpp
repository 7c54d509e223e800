#include "version.hpp"

#include "build_config.h"
#include "build_commit.h"

#include <cstdio>

namespace unbounded {

const char *release() { return PROJECT_VERSION; }
const char *build_commit() { return BUILD_COMMIT; }

void print_version(const char *program) { std::printf("%s %s (commit %s)\n", program, release(), build_commit()); }

}  // namespace unbounded
