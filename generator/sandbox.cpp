#include "sandbox.hpp"

#include "generator.hpp"

#include <algorithm>
#include <string_view>

namespace unbounded::generator {
namespace {

// "/run/nvidia" -> "nvidia" under "/run"; nullopt-like "" when not below `base`.
std::string below(const std::string &dir, std::string_view base)
{
	const std::string prefix = std::string(base) + "/";
	return dir.starts_with(prefix) && dir.size() > prefix.size() ? dir.substr(prefix.size()) : std::string();
}

// One word of a space-separated list setting (ReadWritePaths=, StateDirectory=, ...): systemd splits
// such values at blanks and unquotes each word, so a word holding a blank or a quote is quoted, with
// its backslashes and double quotes escaped.
std::string list_word(const std::string &s)
{
	if (s.find_first_of(" \t\"'\\") == std::string::npos)
		return s;
	std::string q = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\')
			q += '\\';
		q += c;
	}
	return q + "\"";
}

void append_unique(std::vector<std::string> &v, const std::string &s)
{
	std::string word = list_word(s);
	if (std::find(v.begin(), v.end(), word) == v.end())
		v.push_back(std::move(word));
}

std::string joined(const std::vector<std::string> &v)
{
	std::string s;
	for (const auto &x : v)
		s += (s.empty() ? "" : " ") + x;
	return s;
}

// The lines that follow no configured path.
std::string sandbox_fixed_text()
{
	std::string u;
	u += "ProtectHome=yes\n";
	// No PrivateTmp=: setup must see the machine's /tmp/nvidia-mps (the MPS pipe directory it mounts
	// into containers, lib/cdi/ipc.hpp); it writes nothing there (ProtectSystem=strict).
	u += "PrivateMounts=yes\n";
	u += "PrivateIPC=yes\n";
	// No network: only AF_UNIX sockets (sd_notify, the journal, PID 1's private bus). Not
	// PrivateNetwork=: in an nspawn machine without CAP_NET_ADMIN systemd 252 logs "Failed to
	// configure loopback network device" on every start of the unit; the address families and
	// the IP deny list already keep it off the network.
	u += "IPAddressDeny=any\n";
	u += "RestrictAddressFamilies=AF_UNIX\n";
	u += "NoNewPrivileges=yes\n";
	u += "CapabilityBoundingSet=\n";
	u += "AmbientCapabilities=\n";
	u += "SystemCallArchitectures=native\n";
	u += "SystemCallFilter=@system-service\n";
	u += "SystemCallFilter=~@privileged @resources\n";
	u += "SystemCallErrorNumber=EPERM\n";
	u += "ProtectKernelTunables=yes\n";
	u += "ProtectKernelModules=yes\n";
	u += "ProtectKernelLogs=yes\n";
	u += "ProtectControlGroups=yes\n";
	u += "ProtectClock=yes\n";
	u += "ProtectHostname=yes\n";
	// Device nodes stay visible (setup stats /dev/nvidia*, PrivateDevices= would hide them); none
	// may be opened.
	u += "DevicePolicy=closed\n";
	// /proc/driver/nvidia must stay readable (no ProcSubset=pid), and the reloader must see
	// nvidia-gridd's /proc/PID. Not ProtectProc=invisible either: it mounts a new /proc instance for
	// the unit, which drops every overmount of /proc the machine's manager made (nspawn's, and the
	// system tests' stand-in for /proc/driver/nvidia).
	u += "RestrictNamespaces=yes\n";
	u += "LockPersonality=yes\n";
	u += "MemoryDenyWriteExecute=yes\n";
	u += "RestrictRealtime=yes\n";
	u += "RestrictSUIDSGID=yes\n";
	u += "KeyringMode=private\n";
	u += "UMask=0022\n";
	return u;
}

}  // namespace

std::string sandbox_paths_text(const std::vector<std::string> &writable_dirs, const char *state_mode,
			       const std::vector<std::string> &if_present)
{
	std::vector<std::string> runtime, configuration, state, other;
	for (const auto &dir : writable_dirs) {
		// Values are plain absolute paths (config.cpp normal_path); escaped like every unit value.
		auto escaped = unit_path_value(dir);
		if (!escaped)
			continue;
		if (auto r = below(*escaped, "/run"); !r.empty())
			append_unique(runtime, r);
		else if (auto c = below(*escaped, "/etc"); !c.empty())
			append_unique(configuration, c);
		else if (auto s = below(*escaped, "/var/lib"); !s.empty())
			append_unique(state, s);
		else
			append_unique(other, "-" + *escaped);
	}
	for (const auto &dir : if_present)
		if (auto escaped = unit_path_value(dir))
			append_unique(other, "-" + *escaped);

	std::string u;
	// The whole file system read-only, except the directories it writes, which systemd creates
	// (and keeps: the driver root and the license state outlive the process).
	u += "ProtectSystem=strict\n";
	if (!runtime.empty())
		u += "RuntimeDirectory=" + joined(runtime) + "\nRuntimeDirectoryPreserve=yes\n";
	if (!configuration.empty())
		u += "ConfigurationDirectory=" + joined(configuration) + "\n";
	if (!state.empty())
		u += "StateDirectory=" + joined(state) + "\nStateDirectoryMode=" + state_mode + "\n";
	if (!other.empty())
		u += "ReadWritePaths=" + joined(other) + "\n";
	return u;
}

std::string sandbox_text(const std::vector<std::string> &writable_dirs, const std::vector<std::string> &if_present)
{
	return "# Sandbox: unbounded-nvidia-generator(8), SANDBOX, says what each line protects.\n" +
	       sandbox_paths_text(writable_dirs, "0755", if_present) + sandbox_fixed_text();
}

}  // namespace unbounded::generator
