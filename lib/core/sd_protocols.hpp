// The two systemd datagram protocols the boot-path binaries need, spoken directly:
//  - sd_notify(3): "STATUS=..." to $NOTIFY_SOCKET;
//  - the journal's native protocol (systemd's docs/JOURNAL_NATIVE_PROTOCOL.md): structured fields to
//    /run/systemd/journal/socket.
// Both are documented as stable for reimplementation. Doing so keeps libsystemd (which on bookworm's
// 252 pulls in libgcrypt, liblz4, libzstd, liblzma and libcap at load time, about 1 ms per start) off
// the generator and the setup oneshot, which run on every boot; the license reloader uses sd-bus.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace unbounded {

// sd_notify(STATUS=...) so `systemctl status unbounded-nvidia-setup` shows what the oneshot is doing
// and how it ended. A no-op when not run by systemd (NOTIFY_SOCKET unset).
void notify_status(std::string_view status);

namespace sd {

// Sends one journal entry made of KEY=value fields; false when journald cannot be reached.
bool journal_send(const std::vector<std::pair<std::string, std::string>> &fields);

}  // namespace sd
}  // namespace unbounded
