// What one run of setup, refresh or verify decides from, read once at its start (under the lock)
// with the trust checks made as it is read: the kernel module, the live driver root and its manifest,
// and the bytes of every spec file the configuration names. The steps after it take these instead of
// reading again (issue 35): a second read could see another state than the one decided on, and costs
// time on the boot path. What a run writes afterwards it knows without reading it back.
#pragma once

#include "context.hpp"
#include "kernel_module.hpp"
#include "live_root.hpp"
#include "spec_read.hpp"

#include <array>
#include <string>

namespace unbounded {

struct RunSnapshot {
	KernelModule module;
	LiveRootRead live;
	SpecRead cdi_spec;
	std::array<SpecRead, 4> sides;  // in side_specs() order
	SpecRead device_plugin;
};

RootLocation live_root_location(const Context &ctx);
RunSnapshot take_snapshot(const Context &ctx);

}  // namespace unbounded
