// Per-machine settings the host controls, passed the systemd way: as credentials
// (`systemd-nspawn --set-credential=`, `.nspawn` `SetCredential=`, written by unbounded-nvidia-host
// binds --credentials/--enabled), overriding /etc/unbounded/nvidia.yaml of the image:
//   unbounded-nvidia.enabled        auto, or a boolean word: the host's kill switch
//   unbounded-nvidia.expected_gpus  how many GPUs the machine must offer
//   unbounded-nvidia.gpus           the GPUs assigned to it, UUIDs or PCI addresses, comma-separated;
//                                   each must be offered, and expected_gpus defaults to their count
// Read from $CREDENTIALS_DIRECTORY when a unit imported them (ImportCredential=), else from the
// system credentials PID 1 keeps of what the container manager passed: /run/credentials/@system
// (on systemd 252 a link to nspawn's /run/host/credentials, followed inside the root). Each file is
// opened without following its last component or blocking, and read bounded.
#pragma once

#include "config.hpp"
#include "error.hpp"

#include <string>

namespace unbounded {

inline constexpr const char *SYSTEM_CREDENTIALS_DIR = "/run/credentials/@system";
inline constexpr std::size_t MAX_CREDENTIAL_BYTES = 16 * 1024;

// Applies the credentials found to `cfg` (recording each one's origin). A credential whose value is
// not understood is a usage error naming it, as a bad line of the file is. `env_dir`:
// $CREDENTIALS_DIRECTORY, or nullptr.
Result<void> apply_credentials(Config &cfg, const std::string &root, const char *env_dir);

}  // namespace unbounded
