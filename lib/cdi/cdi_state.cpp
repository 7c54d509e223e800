#include "cdi_state.hpp"

#include "cdi_hook.hpp"

#include <fcntl.h>
#include <sys/stat.h>

namespace unbounded {

std::optional<std::string> cdi_hook_in_machine(const Context &ctx)
{
	struct stat st{};
	if (::stat(ctx.real(ctx.config.cdi_hook).c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
		return ctx.config.cdi_hook;
	return std::nullopt;
}

Result<SpecForState> spec_for_state(const Context &ctx, const Manifest &manifest, bool learn_hook)
{
	auto devices = enumerate_devices(ctx);
	if (!devices)
		return fail(devices.error());
	SpecForState s;
	s.devices = std::move(*devices);
	CdiInputs in{&manifest, ctx.config.driver_root, &s.devices, cdi_hook_in_machine(ctx), {}};
	if (in.hook_path) {
		HookCommands h = hook_commands(ctx.real(*in.hook_path), *in.hook_path, ctx.real(RUN_DIR), learn_hook);
		if (!h.warning.empty())
			s.devices.warnings.push_back(h.warning);
		if (h.commands.empty())
			in.hook_path.reset();  // a hook we cannot trust to have what we name: none at all
		in.hook_commands = std::move(h.commands);
	}
	s.spec = generate_cdi(in);
	if (!s.devices.imex_channels.empty())
		s.imex = generate_imex_cdi(s.devices.imex_channels);
	for (const auto &f : s.devices.fabric)
		s.fabric.emplace_back(f.kind, generate_fabric_cdi(f));
	return s;
}

const CdiSpec *SpecForState::side(const char *kind) const
{
	if (std::string_view(kind) == IMEX_CDI_KIND)
		return imex ? &*imex : nullptr;
	for (const auto &[k, spec] : fabric)
		if (std::string_view(k) == kind)
			return &spec;
	return nullptr;
}

std::optional<std::string> gpu_shortfall(std::optional<unsigned> expected, const DeviceInventory &devices)
{
	if (!expected || devices.gpus.size() >= *expected)
		return std::nullopt;
	std::string s = "expected_gpus is " + std::to_string(*expected) + " but the machine offers " +
			std::to_string(devices.gpus.size()) + " GPU(s)";
	if (!devices.unbound_gpus.empty()) {
		s += "; listed without their /dev/nvidia<minor>:";
		for (const auto &u : devices.unbound_gpus)
			s += " " + u;
	}
	if (devices.source == "proc" && devices.listed_gpus < *expected)
		s += "; " + std::to_string(devices.listed_gpus) + " listed in /proc/driver/nvidia/gpus (a GPU that fell off the bus is not listed: see the host's kernel log)";
	return s;
}

}  // namespace unbounded
