#include "notify.hpp"

#include <string>
#include <systemd/sd-daemon.h>

namespace unbounded {

void notify_status(std::string_view status)
{
	std::string msg = "STATUS=";
	msg += status;
	(void)sd_notify(0, msg.c_str());
}

}  // namespace unbounded
