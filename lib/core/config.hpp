// /etc/unbounded/nvidia.yaml: optional; absent means defaults. Unknown keys and bad values are
// usage errors (exit 2) that name the file, the line and the key.
#pragma once

#include "error.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unbounded {

using Millis = std::chrono::milliseconds;

inline constexpr std::string_view DEFAULT_CONFIG_PATH = "/etc/unbounded/nvidia.yaml";
// setup's lock, discovery memo and status.json (not configurable: the host's reconcile loop reads it).
inline constexpr const char *RUN_DIR = "/run/unbounded-nvidia";

enum class Enabled {
	Auto,
	Yes,
	No,
};

struct LicensingConfig {
	bool section_present = false;  // a `licensing:` mapping was in the file
	std::string source_dir = "/run/host-nvidia-licensing";
	std::string legacy_gridd_conf = "/drivers/gridd.conf";
	std::string legacy_client_token = "/drivers/ClientConfigToken/client_configuration_token.tok";
	std::string gridd_conf_target = "/etc/nvidia/gridd.conf";
	std::string client_token_target = "/etc/nvidia/ClientConfigToken/client_configuration_token.tok";
	std::string state_dir = "/var/lib/unbounded-nvidia/license";
	std::string gridd_unit = "nvidia-gridd.service";
	Millis jitter{60'000};
	bool auto_reload = true;
	Millis reload_interval{30'000};
	Millis settle_time{5'000};
	Millis stop_timeout{60'000};
	// node-problem-detector's NvidiaLicenseNotAcquired: nvidia-gridd running unlicensed or pending this
	// long (half the 20-minute grace period by default). Observed only: nothing acts on it.
	Millis not_acquired_after{600'000};
};

// The refresh path (unbounded-nvidia-refresh.{path,timer,service}): applies host driver changes while
// the machine runs.
struct RefreshConfig {
	Millis settle_time{10'000};    // staging must have been quiet this long before a refresh reads it
	Millis settle_limit{300'000};  // the longest a refresh waits for quiet before it reads anyway
	Millis interval{300'000};      // the timer backstop: events lost while a refresh runs, module reloads
};

// The Kubernetes consumers that read the driver root once, at their own start (the device plugin's
// CDI spec, dcgm-exporter's NVML): after a change of what our specs offer, unbounded-nvidia-consumers
// restarts their containers through the runtime's CRI so that kubelet starts them on the new root.
struct ConsumerSelector {
	std::map<std::string, std::string> labels;  // a pod matches when it carries every one
	std::string text;                           // as written: "app=nvidia-device-plugin-daemonset"
};

struct ConsumersConfig {
	bool enabled = true;
	// The labels the consumers carry in their own Helm charts and the GPU Operator's manifests.
	std::vector<ConsumerSelector> selectors = default_consumer_selectors();
	// Only pods in these namespaces are consumers (empty: any): a tenant's pod that carries one of the
	// labels must not be restarted, nor hold verify back when it does not come back.
	std::vector<std::string> namespaces = {"kube-system", "gpu-operator", "nvidia-gpu-operator", "nvidia-device-plugin",
					       "nvidia-dra-driver-gpu", "nvidia-dcgm-exporter", "dcgm-exporter", "gpu-feature-discovery"};
	// The runtime's CRI socket; "" for the first of containerd's and CRI-O's that exists.
	std::string runtime_endpoint;
	Millis wait{180'000};         // how long a restarted consumer has to run again (and the plugin to rewrite its spec)
	Millis stop_timeout{30'000};  // StopContainer's grace before the runtime kills
	static std::vector<ConsumerSelector> default_consumer_selectors();
	bool in_namespace(const std::string &ns) const;
};

// "key=value[,key=value...]", Kubernetes' equality-based selector syntax (the CRI filters by equality
// only). Label keys and values as Kubernetes validates them.
std::optional<ConsumerSelector> parse_consumer_selector(std::string_view text);

struct Config {
	Enabled enabled = Enabled::Auto;
	std::string staging = "/run/host-nvidia";
	std::string driver_root = "/run/nvidia/driver";
	std::string cdi_spec = "/etc/cdi/nvidia.yaml";
	std::string imex_cdi_spec = "/etc/cdi/nvidia-imex-channel.yaml";  // written only while there are IMEX channels
	// The fabric and peer devices' specs (lib/cdi/fabric.hpp), each written only while its nodes exist.
	std::string nvswitch_cdi_spec = "/etc/cdi/nvidia-nvswitch.yaml";
	std::string gdrcopy_cdi_spec = "/etc/cdi/nvidia-gdrcopy.yaml";
	std::string gds_cdi_spec = "/etc/cdi/nvidia-gds.yaml";
	std::string device_plugin_spec = "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json";
	std::string cdi_hook = "/usr/bin/nvidia-cdi-hook";
	// containerd's configuration, read by verify to tell whether containerd will use our spec
	// (lib/consumer/containerd.hpp); containerd --config names another.
	std::string containerd_config = "/etc/containerd/config.toml";
	Millis staging_timeout{30'000};
	LicensingConfig licensing;
	RefreshConfig refresh;
	ConsumersConfig consumers;
	// node_exporter's textfile collector directory (Debian's prometheus-node-exporter reads this one).
	std::string metrics_dir = "/var/lib/prometheus/node-exporter";
	// How many GPUs this machine should see; unset: whatever it was given. Fewer leave setup serving
	// those there are (one missing GPU must not take the others down), and verify not ready.
	std::optional<unsigned> expected_gpus;
	// Mount the NVIDIA daemons' sockets and the MPS pipe directory when present (lib/cdi/ipc.hpp); off
	// for a device-plugin-style spec, as nvidia-ctk's disable-ipc-discoverer.
	bool ipc_sockets = true;
	// Copy OptiX's nvoptix.bin into the root with libnvoptix (134 MB of RAM in Debian's 535 driver);
	// off for compute-only fleets that never ray-trace.
	bool nvoptix = true;
	// The GPUs the host assigned this machine (credential unbounded-nvidia.gpus): UUIDs or PCI
	// addresses, each of which the machine must offer (credentials.hpp).
	std::vector<std::string> assigned_gpus;
	// Where enabled, expected_gpus and gpus were set: the file's path, or "credential NAME (DIR)".
	std::map<std::string, std::string> origins;
	// Where `key` came from, for messages: its origin, else the file's default path.
	std::string origin(const std::string &key) const;
};

// The values of `enabled` (auto and the six boolean words) and `expected_gpus` (1 to MAX_EXPECTED_GPUS),
// as the file and the host's credentials (credentials.hpp) give them.
std::optional<Enabled> parse_enabled(std::string_view s);
std::optional<unsigned> parse_gpu_count(std::string_view s);

inline constexpr unsigned MAX_EXPECTED_GPUS = 1024;

// The configuration says this is a GPU machine (enabled: true, or expected_gpus set), whatever the host
// bound: a machine that lost its binds is then broken, never a CPU node. "" when it does not say so,
// else what says it, for messages.
std::string configured_gpu_machine(const Config &cfg);
// What setup and verify say of such a machine whose host bound nothing (no staging entry, no
// /dev/nvidiactl).
std::string nothing_bound_message(const Config &cfg);

// Parses "30s", "500ms", "2m", "1h", "1m30s" or a bare number of seconds.
Result<Millis> parse_duration(std::string_view text);
std::string format_duration(Millis d);

// The knobs of the driver container's watcher, VGPU_LICENSE_AUTO_RELOAD (anything but "true" switches
// the reloader off) and VGPU_LICENSE_RELOAD_INTERVAL (a duration of at least 1s, read by
// parse_duration()), override the config file when set. A value that is not understood is ignored
// with a warning (returned): a typo must never switch rotation off.
inline constexpr const char *LICENSE_ENVIRONMENT_FILE = "/etc/default/unbounded-nvidia-license-reload";
using EnvLookup = std::function<std::optional<std::string>(const char *name)>;
std::vector<std::string> apply_license_environment(LicensingConfig &lic, const EnvLookup &env);

// What the license reloader's service sees: the process environment (PID 1's, systemd.setenv=),
// overridden by LICENSE_ENVIRONMENT_FILE, as systemd gives EnvironmentFile= precedence. `real_file`
// is the file with --root applied; "" for the process environment alone.
EnvLookup license_environment(const std::string &real_file, std::vector<std::string> &warnings);

// Loads `path`; a missing file gives defaults unless `must_exist`.
Result<Config> load_config(const std::string &path, bool must_exist);
Result<Config> parse_config(std::string_view yaml_text, const std::string &display_path);

}  // namespace unbounded
