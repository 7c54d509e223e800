// sd_notify(STATUS=...) so `systemctl status unbounded-nvidia-setup` shows what the oneshot is doing
// and how it ended. A no-op when not run by systemd (NOTIFY_SOCKET unset).
#pragma once

#include <string_view>

namespace unbounded {

void notify_status(std::string_view status);

}  // namespace unbounded
