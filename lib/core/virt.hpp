// Whether this system runs in a container, as systemd itself says, for the two programs that must
// act only on their side: the generator (only in a machine) and the host tool (only on a host).
#pragma once

#include <optional>
#include <string>

namespace unbounded {

// The container manager PID 1 runs under: `virtualization` ($SYSTEMD_VIRTUALIZATION, which PID 1
// passes to generators since systemd 251: "container:NAME" or "vm:NAME") when given, else the root's
// /run/systemd/container (written by PID 1 from its $container, and by systemd-nspawn). nullopt
// outside a container (bare metal or a VM), with what said so in `why`.
std::optional<std::string> container_manager(const std::string &root, const std::optional<std::string> &virtualization, std::string &why);

}  // namespace unbounded
