// Per-machine settings the host controls, overriding /etc/unbounded/nvidia.yaml of the image. They reach
// the machine as files named like credentials, in a host directory that `unbounded-nvidia-host binds
// --credentials/--enabled` writes and binds read-only at /run/host-nvidia-settings (`.nspawn`
// BindReadOnly=, which every systemd-nspawn reads; no nspawn reads a credential from a .nspawn file),
// or as credentials (`systemd-nspawn --set-credential=` on its command line):
//   unbounded-nvidia.enabled        auto, or a boolean word: the host's kill switch
//   unbounded-nvidia.expected_gpus  how many GPUs the machine must offer
//   unbounded-nvidia.gpus           the GPUs assigned to it, UUIDs or PCI addresses, comma-separated;
//                                   each must be offered, and expected_gpus defaults to their count
// Read from the host's settings directory, else from $CREDENTIALS_DIRECTORY when a unit imported them
// (LoadCredential=, ImportCredential=), else from the system credentials PID 1 keeps of what the container manager
// passed: /run/credentials/@system (on systemd 252 a link to nspawn's /run/host/credentials, followed
// inside the root). Each file is opened without following its last component or blocking, and read
// bounded.
#pragma once

#include "config.hpp"
#include "error.hpp"

#include <optional>
#include <string>
#include <vector>

namespace unbounded {

inline constexpr const char *SYSTEM_CREDENTIALS_DIR = "/run/credentials/@system";
inline constexpr const char *HOST_SETTINGS_DIR = "/run/host-nvidia-settings";
inline constexpr std::size_t MAX_CREDENTIAL_BYTES = 16 * 1024;

// The machine's configuration as the generator, setup and verify all take it: the image's file
// (load_config()), the host's settings over it, and the host's kill switch over every error of either:
// a machine the host switched off gets the defaults, switched off, and the error as a warning in
// `warnings`, so that a typo can never put setup in front of containerd there. `env_dir`:
// $CREDENTIALS_DIRECTORY, or nullptr. The settings' directories are opened once for both.
Result<Config> load_machine_config(const std::string &config_path, bool must_exist, const std::string &root, const char *env_dir,
				   std::vector<std::string> &warnings);

}  // namespace unbounded
