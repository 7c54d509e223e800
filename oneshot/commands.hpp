// The commands of unbounded-nvidia-setup. Each fills a Report and returns the exit code.
#pragma once

#include "context.hpp"
#include "report.hpp"

#include <string>

namespace unbounded {

inline constexpr const char *RUN_DIR = "/run/unbounded-nvidia";

int run_setup(const Context &ctx, Report &report);

}  // namespace unbounded
