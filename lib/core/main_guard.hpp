// The one place exceptions stop: every main() runs its body through guarded_main(), so anything that
// escaped the Result-based code (a bug, or std::bad_alloc) becomes one line and exit status 1.
#pragma once

#include "error.hpp"

#include <cstdio>
#include <exception>

namespace unbounded {

template <typename Body> int guarded_main(const char *program, Body &&body) noexcept
{
	try {
		return body();
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
	} catch (...) {
		std::fprintf(stderr, "%s: internal error\n", program);
	}
	return EXIT_NOT_READY;
}

}  // namespace unbounded
