// nvidia-gridd's FeatureType (gridd.conf) against the feature the driver has licensed. Once a license
// is held, NVIDIA's driver keeps the licensed feature until the system restarts: nvidia-settings'
// license page (ctkgridlicense.c, is_restart_required) asks for a restart whenever the feature
// licensed on the system (NVML's enabled feature code) is not 0 and differs from gridd.conf's
// FeatureType. Restarting nvidia-gridd with such a file applies nothing, so the reloader leaves the
// files and nvidia-gridd as they are and says that the host must reboot.
#pragma once

#include "context.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace unbounded {

// A rotation's FeatureType that the licensed feature keeps from taking effect until the host reboots.
struct FeatureChange {
	int requested;  // the source's gridd.conf
	int licensed;   // what the driver holds a license for on this boot of the host
};

// gridd.conf's FeatureType as nvidia-settings reads the file: per line, blanks removed, '#' lines
// skipped, "FeatureType=" followed by a value (an empty value changes nothing), the last one wins,
// 0 when none. nullopt: the value is not a number (nvidia-gridd's own reading of it is unknown).
std::optional<int> gridd_feature_type(std::string_view gridd_conf);

// "FeatureType=4 (NVIDIA Virtual Compute Server)" for messages; the products of NVIDIA's vGPU
// licensing guide, by feature code.
std::string feature_type_text(int feature);

// Which boot of the host this is: /proc/stat's btime (the host's, in a container too; a machine's
// boot ID is its own). Empty when it cannot be read.
std::string host_boot(const Context &ctx);

}  // namespace unbounded
