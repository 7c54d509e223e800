// IMEX channels: /dev/nvidia-caps-imex-channels/channel<N>, the nodes that let a container share GPU
// memory over NVLink with other nodes of the same IMEX domain (pkg/nvcdi/lib-imex.go). They get a
// spec of their own, kind nvidia.com/imex-channel, one device per channel named by its id.
#pragma once

#include "context.hpp"
#include "devices.hpp"
#include "mig.hpp"
#include "side_specs.hpp"

#include <string>
#include <vector>

namespace unbounded {

inline constexpr const char *IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels";
// Channel ids fit the 20 bits of a dev_t minor; the channel's minor is its id.
inline constexpr unsigned MAX_IMEX_CHANNEL = (1u << 20) - 1;

// The most channels a spec is written for: four times the driver's default (NVreg_ImexChannelCount
// is 2048). Each costs ~350 bytes of spec and ~1 KiB while it is generated; ids go to 2^20-1, and
// an inventory that size (100,000 channels: 107 MiB) is refused before anything is written.
inline constexpr std::size_t MAX_IMEX_CHANNELS = 8192;

// The channels in the machine, by id. A name that is not channel<id>, or a node that is not a
// character device of the nvidia-caps-imex-channels major (when /proc/devices names it) with minor
// <id>, is left out with a warning: no channel is better than a channel that opens something else.
// More than MAX_IMEX_CHANNELS fails, naming the count.
Result<std::vector<ImexChannel>> enumerate_imex_channels(const Context &ctx, CharMajors &majors, std::vector<std::string> &warnings);

}  // namespace unbounded
