// What one run of setup, refresh or verify decides from, read once at its start (under the lock)
// with the trust checks made as it is read: the kernel module, the live driver root and its manifest,
// the bytes of every spec file the configuration names, and the devices and hook the specs are made
// for (plan_specs() makes them from it, as often as a run needs, without reading again). The steps after it take these instead of
// reading again: a second read could see another state than the one decided on, and costs
// time on the boot path. What a run writes afterwards it knows without reading it back.
#pragma once

#include "cdi_state.hpp"
#include "context.hpp"
#include "kernel_module.hpp"
#include "live_root.hpp"
#include "side_specs.hpp"
#include "spec_read.hpp"

#include <string>
#include <vector>

namespace unbounded {

// A side spec (side_specs.hpp: which file, of which kind; it points into the run's configuration,
// which outlives the snapshot) and what this run read of it.
struct SideSpecRead {
	SideSpec spec;
	SpecRead read;
};

struct RunSnapshot {
	KernelModule module;
	LiveRootRead live;
	SpecRead cdi_spec;
	std::vector<SideSpecRead> sides;  // in side_specs() order, the order they are changed in
	SpecRead device_plugin;
	MachineDevices machine;
};

RootLocation live_root_location(const Context &ctx);
// `learn_hook` as for read_machine_devices(): setup and refresh may run the hook and memoise it.
RunSnapshot take_snapshot(const Context &ctx, bool learn_hook);

}  // namespace unbounded
