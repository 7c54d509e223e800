#include "cdi_state.hpp"

#include "cdi_hook.hpp"

#include <algorithm>
#include <sys/stat.h>

namespace unbounded {

MachineDevices read_machine_devices(const Context &ctx, bool learn_hook)
{
	MachineDevices m;
	m.devices = enumerate_devices(ctx);
	// The hook only when that binary exists (a regular executable file) in the machine.
	struct stat st = {};
	if (::stat(ctx.real(ctx.config.cdi_hook).c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
		m.hook_path = ctx.config.cdi_hook;
	if (m.hook_path) {
		HookCommands h = hook_commands(ctx.real(*m.hook_path), *m.hook_path, ctx.real(RUN_DIR));
		m.hook_warning = std::move(h.warning);
		if (learn_hook)
			m.hook_memo = std::move(h.memo);
		if (h.commands.empty())
			m.hook_path.reset();  // a hook we cannot trust to have what we name: none at all
		m.hook_commands = std::move(h.commands);
	}
	return m;
}

Result<SpecForState> plan_specs(const std::string &driver_root, const Manifest &manifest, const MachineDevices &machine)
{
	if (!machine.devices)
		return fail(machine.devices.error());
	SpecForState s;
	s.devices = *machine.devices;
	if (!machine.hook_warning.empty())
		s.devices.warnings.push_back(machine.hook_warning);
	const CdiInputs in{&manifest, driver_root, &s.devices, machine.hook_path, machine.hook_commands};
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

namespace {

// The assigned GPUs (UUIDs or PCI addresses, "18:00.0" without its domain too) the machine does not offer.
std::vector<std::string> not_offered(const std::vector<std::string> &assigned, const DeviceInventory &devices)
{
	std::vector<std::string> missing;
	for (const auto &a : assigned) {
		std::string pci = a;
		std::transform(pci.begin(), pci.end(), pci.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
		if (std::count(pci.begin(), pci.end(), ':') == 1)
			pci = "0000:" + pci;
		if (std::none_of(devices.gpus.begin(), devices.gpus.end(), [&](const Gpu &g) { return g.uuid == a || (!g.pci.empty() && g.pci == pci); }))
			missing.push_back(a);
	}
	return missing;
}

}  // namespace

std::optional<std::string> gpu_shortfall(std::optional<unsigned> expected, const DeviceInventory &devices,
					 const std::vector<std::string> &assigned, const std::string &assigned_origin)
{
	const auto missing = not_offered(assigned, devices);
	if ((!expected || devices.gpus.size() >= *expected) && missing.empty())
		return std::nullopt;
	std::string s = expected && devices.gpus.size() < *expected ? "expected_gpus is " + std::to_string(*expected) + " but the machine offers " +
									      std::to_string(devices.gpus.size()) + " GPU(s)"
								    : std::string("The machine does not offer every GPU the host assigned it");
	if (!missing.empty()) {
		s += "; assigned by " + assigned_origin + " and not offered:";
		for (const auto &m : missing)
			s += " " + m;
	}
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
