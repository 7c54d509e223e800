// MIG compute instances as the kernel lists them, without NVML (what nvidia-ctk's internal/nvcaps and
// pkg/nvcdi/lib-nvml.go get through NVML, read from /proc instead):
//   /proc/driver/nvidia/capabilities/gpu<G>/mig/gi<I>/access          a GPU instance that exists
//   /proc/driver/nvidia/capabilities/gpu<G>/mig/gi<I>/ci<C>/access    a compute instance that exists
//   /proc/driver/nvidia-caps/mig-minors    "gpu<G>/gi<I>/ci<C>/access <minor>" for every possible one
//   /proc/devices                          the dynamic major of "nvidia-caps"
// <G> is the GPU's device minor (the N of /dev/nvidiaN). A MIG device is one compute instance: the
// container needs its parent /dev/nvidiaN plus the GI and the CI access nodes,
// /dev/nvidia-caps/nvidia-cap<minor>. The `config` and `monitor` capabilities are never exposed.
#pragma once

#include "context.hpp"
#include "devices.hpp"
#include "error.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

inline constexpr const char *PROC_CAPABILITIES = "/proc/driver/nvidia/capabilities";
inline constexpr const char *PROC_MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors";
inline constexpr const char *PROC_DEVICES = "/proc/devices";
inline constexpr const char *NVIDIA_CAPS_DEV_DIR = "/dev/nvidia-caps";

// The "Character devices:" section of /proc/devices: name -> major. Block devices are not read.
std::map<std::string, unsigned> parse_proc_devices(std::string_view text);

// /proc/devices' character majors, read on first use and then kept: MIG instances and IMEX channels
// both need them, most machines neither.
class CharMajors {
public:
	explicit CharMajors(const Context &ctx) : ctx_(ctx) {}
	const Result<std::map<std::string, unsigned>> &get();

private:
	const Context &ctx_;
	std::optional<Result<std::map<std::string, unsigned>>> majors_;
};

// mig-minors: capability name -> minor. Lines that are not "NAME MINOR" with a GI/CI access, config
// or monitor name are left out and described in `skipped` ("<display>:<line>: ..."), as nvidia-ctk
// skips them: a format the kernel grows must not cost every GPU. With `wanted`, only those names
// are kept (every line is still checked).
std::map<std::string, unsigned> parse_mig_minors(std::string_view text, const std::string &display,
						 std::vector<std::string> *skipped = nullptr,
						 const std::set<std::string, std::less<>> *wanted = nullptr);

// The compute instances one GPU has, from its capabilities tree: (gi, ci) pairs in numeric order,
// and the GIs that exist (a GI without a CI is no device). Empty when MIG is off or unsupported.
struct MigTree {
	std::vector<unsigned> gpu_instances;
	std::vector<std::pair<unsigned, unsigned>> compute_instances;
};
Result<MigTree> read_mig_tree(const Context &ctx, unsigned gpu_minor);

// "gpu0/gi1/access", "gpu0/gi1/ci0/access": the names mig-minors and the capabilities tree share.
std::string gi_capability(unsigned gpu_minor, unsigned gi);
std::string ci_capability(unsigned gpu_minor, unsigned gi, unsigned ci);

// The MIG devices of every GPU of `inv`, attached to it (Gpu::migs). Fails, naming what is missing,
// when an instance exists but its minor, the nvidia-caps major or its device node in the machine
// does not (the host did not bind /dev/nvidia-caps), or a node disagrees with the kernel.
Result<void> add_mig_devices(const Context &ctx, CharMajors &majors, DeviceInventory &inv);

}  // namespace unbounded
