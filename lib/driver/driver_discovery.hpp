// Finds the NVIDIA driver in the staging trees: its version (from libcuda.so.<v>, cross-checked with
// libnvidia-ml.so.<v>), and the files that make up
// the driver root: every lib*.so.<v> of that version with its EGL/GBM companions, the helper binaries,
// and the GSP firmware. Nothing else of a host's lib dir is taken. Whether that version may go live
// (the kernel module's) is the caller's decision (refresh_policy.hpp).
#pragma once

#include "error.hpp"
#include "staging.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

// Driver versions: in file names ("libcuda.so.535.104.05"), in the kernel module's
// /proc/driver/nvidia/version, and their order.
// "535.104.05" from "libcuda.so.535.104.05" with prefix "libcuda.so."; nullopt when the rest is not a
// driver version (two or three dot-separated numbers).
std::optional<std::string> version_suffix(std::string_view name, std::string_view prefix);
bool is_driver_version(std::string_view v);   // 2 or 3 numbers, the first of at least 3 digits
bool is_library_version(std::string_view v);  // 2 or 3 numbers ("1.1.9")
// Kernel module version from the text of /proc/driver/nvidia/version.
std::optional<std::string> parse_proc_version(std::string_view text);
// -1/0/1 comparing dotted numeric versions.
int compare_versions(std::string_view a, std::string_view b);

class DiscoveryCache;

enum class FileKind {
	Library,
	Binary,
	Firmware,
	Config,
	Data,
};  // Data: the DLSS DLLs for Proton

struct DriverFile {
	FileKind kind = FileKind::Library;
	std::string dest;  // relative to the driver root: "lib/x86_64-linux-gnu/libcuda.so.535.1"
	ResolvedFile source;
	std::optional<std::string> soname;  // DT_SONAME for libraries
	std::vector<std::string> needed;    // its DT_NEEDED entries that name NVIDIA libraries
};

struct DriverSet {
	std::string version;                // "535.104.05"
	std::string multiarch;              // of libcuda: "x86_64-linux-gnu"
	std::string libcuda_display;        // where libcuda.so.<version> was found, for messages
	std::vector<DriverFile> files;      // sorted by dest
	std::vector<std::string> warnings;  // something a pod may need is missing: carried by verify
	std::vector<std::string> notes;     // entries skipped that nothing depends on (logged, reported)
};

// The most libraries of the driver's version a root is built of (see add_libraries).
inline constexpr std::size_t MAX_DRIVER_LIBRARIES = 1024;

// The helper binaries copied into bin/ when staged. nvidia-imex and nvidia-imex-ctl: the DRA driver's
// ComputeDomain daemons run the IMEX daemon from the driver root (nvidia-ctk's locator looks in its bin/).
inline constexpr const char *HELPER_BINARIES[] = {
	"nvidia-smi",
	"nvidia-debugdump",
	"nvidia-persistenced",
	"nvidia-cuda-mps-control",
	"nvidia-cuda-mps-server",
	"nvidia-imex",
	"nvidia-imex-ctl",
};

// Version-independent pre-filter applied while listing a staging directory.
bool could_be_driver_file(std::string_view name);

struct DiscoveryInput {
	const Staging *staging = nullptr;
	std::optional<std::string> kernel_version;  // chooses among several staged versions
	DiscoveryCache *cache = nullptr;            // optional memo of listings and ELF facts
	bool optix_data = true;                     // copy nvoptix.bin with libnvoptix (config `nvoptix`)
};

Result<DriverSet> discover_driver(const DiscoveryInput &in);

}  // namespace unbounded
