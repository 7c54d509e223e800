#include "notify.hpp"

#include "sd_protocols.hpp"

#include <string>

namespace unbounded {

void notify_status(std::string_view status)
{
	std::string msg = "STATUS=";
	msg += status;
	(void)sd::notify(msg);
}

}  // namespace unbounded
