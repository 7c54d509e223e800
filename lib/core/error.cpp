#include "error.hpp"

#include <cstring>

namespace unbounded {

std::string errno_string(int errnum)
{
	char buf[256];
	// GNU strerror_r returns a pointer that may or may not be buf.
	return ::strerror_r(errnum, buf, sizeof(buf));
}

Error errno_error(int errnum, std::string_view what)
{
	std::string msg{what};
	msg += ": ";
	msg += errno_string(errnum);
	return Error{errnum, std::move(msg), EXIT_NOT_READY};
}

Error make_error(std::string message, int exit_code, int errnum)
{
	return Error{errnum, std::move(message), exit_code};
}

Error with_context(Error e, std::string_view context)
{
	e.message = std::string(context) + ": " + e.message;
	return e;
}

}  // namespace unbounded
