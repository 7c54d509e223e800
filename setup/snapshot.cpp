#include "snapshot.hpp"

#include "bounded_parse.hpp"

namespace unbounded {

RootLocation live_root_location(const Context &ctx)
{
	return RootLocation{ctx.real(ctx.config.driver_root), ctx.config.driver_root, ctx.config.staging};
}

RunSnapshot take_snapshot(const Context &ctx, bool learn_hook)
{
	RunSnapshot s;
	// The kernel module is read on every run: a path unit cannot watch /proc, so a module reload is
	// noticed by the next refresh, whatever started it.
	s.module = read_kernel_module(ctx);
	s.live = read_live_root(live_root_location(ctx));
	s.cdi_spec = read_spec(ctx, ctx.config.cdi_spec);
	for (const SideSpec &side : side_specs(ctx.config))
		s.sides.push_back(SideSpecRead{side, read_spec(ctx, *side.path)});
	// Written by a pod and only ever checked up to MAX_SPEC_BYTES.
	s.device_plugin = read_spec(ctx, ctx.config.device_plugin_spec, MAX_SPEC_BYTES);
	s.machine = read_machine_devices(ctx, learn_hook);
	return s;
}

}  // namespace unbounded
