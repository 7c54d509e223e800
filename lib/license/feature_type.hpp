// nvidia-gridd's FeatureType (gridd.conf) against the feature the driver has licensed. Once a license
// is held, NVIDIA's driver keeps the licensed feature until the system restarts: nvidia-settings'
// license page (ctkgridlicense.c, is_restart_required) asks for a restart whenever the feature
// licensed on the system is not 0 and differs from gridd.conf's FeatureType; on a vGPU its feature
// is the vGPU's whatever the file says (updateFeatureTypeFromGriddConfig), so nothing waits there.
// Restarting nvidia-gridd with such a file applies nothing, so the reloader leaves the files and
// nvidia-gridd as they are and says that the host must reboot.
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

// gridd.conf's FeatureType as nvidia-settings reads and maps it: per line, blanks removed, '#' lines
// skipped, "FeatureType=" followed by a value (an empty value changes nothing), the last one wins;
// "4" is NVIDIA Virtual Compute Server, "2" NVIDIA RTX Virtual Workstation, "1" NVIDIA vGPU (the
// guest of a vGPU, whose feature its vGPU type decides), anything else 0 (unlicensed).
int gridd_feature_type(std::string_view gridd_conf);

// Whether a rotation to `requested` must wait for the host's reboot while `licensed` is held.
inline bool feature_waits_for_reboot(int licensed, int requested)
{
	return (licensed == 2 || licensed == 4) && requested != licensed;
}

// "FeatureType=4 (NVIDIA Virtual Compute Server)" for messages.
std::string feature_type_text(int feature);

// Which boot of the host this is, in a way a stepped clock does not change: /proc/stat's btime (the
// host's, in a container too: a machine's boot ID is its own) with /proc/uptime. btime moves with
// every step of the wall clock (chrony's makestep, a hypervisor's time sync); uptime only grows
// until the host reboots.
struct HostBoot {
	long long btime = 0;
	double uptime = 0;
	bool known() const { return btime > 0; }
	// The same boot as `earlier`: uptime has not gone back and btime moved less than a clock step's
	// worth (a host that reboots within that time of its boot, after `earlier` was taken, is missed).
	bool same_as(const HostBoot &earlier) const;
};
HostBoot host_boot(const Context &ctx);

}  // namespace unbounded
