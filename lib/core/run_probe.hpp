// Running a program of the machine's to ask it about itself, as zram-generator asks modprobe rather
// than copying it: nvidia-cdi-hook --help (which commands it has), containerd --version (where no
// package database knows it).
#pragma once

#include "config.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace unbounded {

// Runs `path arg` with nothing inherited but a plain environment (stdin and stderr /dev/null): its
// stdout, at most `max_bytes`, when it exits 0 within `timeout`; nullopt otherwise. It runs in a
// process group of its own, killed whole when the probe ends.
std::optional<std::string> run_probe(const std::string &path, const char *arg, Millis timeout, std::size_t max_bytes);

}  // namespace unbounded
