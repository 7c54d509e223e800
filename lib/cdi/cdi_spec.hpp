// The CDI spec for the driver root, as `nvidia-ctk cdi generate --driver-root=/run/nvidia/driver
// --dev-root=/` writes it (reference/cdi-and-nvidia-ctk.md), generated natively: kind nvidia.com/gpu,
// devices "0".."N-1" (PCI order), GPU-<uuid> where known and "all"; top-level env, control nodes, one
// read-only mount per driver file, and the nvidia-cdi-hook hooks only when that binary exists; MIG
// compute instances "<gpu>:<mig>" in place of their MIG-enabled GPU.
// Deterministic: the same root and devices give the same bytes.
#pragma once

#include "devices.hpp"
#include "imex.hpp"
#include "manifest.hpp"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace unbounded {

inline constexpr const char *CDI_KIND = "nvidia.com/gpu";
inline const std::vector<std::string> CDI_MOUNT_OPTIONS = {"ro", "nosuid", "nodev", "rbind", "rprivate"};

struct CdiInputs {
	const Manifest *manifest = nullptr;
	std::string driver_root;  // as in the machine: "/run/nvidia/driver"
	const DeviceInventory *devices = nullptr;
	std::optional<std::string> hook_path;  // set only when the hook binary exists in the machine
	std::set<std::string> hook_commands;   // what it can do (see cdi_hook.hpp); only these are emitted
};

struct CdiParts;  // its devices and edits (cdi_spec.cpp)

struct CdiSpec {
	std::string yaml;  // the file's bytes
	std::string cdi_version;
	std::size_t devices = 0, mounts = 0, device_nodes = 0, hooks = 0;
	// What verify checks of a spec it has just generated, besides the nodes it has just read:
	std::vector<std::string> mount_host_paths;  // the top-level mounts' hostPaths
	std::optional<std::string> hook_path;       // when the spec names hooks
	std::shared_ptr<const CdiParts> parts;

	// Its kind, from the parts it was made of (no parse of the bytes).
	const char *kind() const;
};

CdiSpec generate_cdi(const CdiInputs &in);

// The IMEX channel spec: kind nvidia.com/imex-channel, a device per channel named by its id, and
// "all", as `nvidia-ctk cdi generate --class imex-channel` writes it. Needs at least one channel.
CdiSpec generate_imex_cdi(const std::vector<ImexChannel> &channels);

// A fabric device class's spec (fabric.hpp): its kind, one device "all" with every node (and GDS's
// mounts), top-level NVIDIA_VISIBLE_DEVICES=void, as nvidia-ctk's gated modes write it.
CdiSpec generate_fabric_cdi(const FabricDevices &fabric);

// String scalars of block-style YAML, byte-identical to what yaml-cpp's Emitter writes (a unit test
// holds the two equal). yaml-cpp decides for every scalar whether it may be written plain by running a
// regular-expression engine, about 28,000 instructions a scalar and 80 % of generating a CDI spec;
// here scalars drawn from the characters of paths, names and options are checked directly and
// anything else is handed to yaml-cpp, which quotes and escapes it.
// One string scalar, for writers that stream a document of a known shape (the CDI spec). Strings
// made only of digits, and "<digit>...:..." (a MIG device name), are double-quoted, so "0" stays a
// string for every YAML reader.
void append_yaml_string(std::string &out, const std::string &s);

}  // namespace unbounded
