// The one error style of the project: every fallible function returns Result<T>, an std::expected whose
// error carries the errno (or 0 when the cause is not a syscall), a complete sentence naming the path,
// and the exit code the failure maps to. Exceptions from yaml-cpp/nlohmann are caught where they arise
// and converted; none crosses a main().
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <string_view>

namespace unbounded {

enum ExitCode : int {
	EXIT_READY = 0,
	EXIT_NOT_READY = 1,  // runtime failure: the machine is not ready, reasons printed
	EXIT_USAGE = 2,      // bad command line or configuration
};

struct Error {
	int errnum = 0;       // positive errno, 0 when no syscall is involved
	std::string message;  // "Failed to copy /run/host-nvidia/0/libcuda.so.1: No space left on device"
	int exit_code = EXIT_NOT_READY;
};

template <typename T = void> using Result = std::expected<T, Error>;

std::string errno_string(int errnum);

// "what: strerror(errnum)", like systemd's log_error_errno(r, "Failed to ...: %m").
Error errno_error(int errnum, std::string_view what);
inline Error last_errno_error(std::string_view what) { return errno_error(errno, what); }

Error make_error(std::string message, int exit_code = EXIT_NOT_READY, int errnum = 0);
inline Error usage_error(std::string message) { return make_error(std::move(message), EXIT_USAGE); }

// Prefixes the message with more context, keeping errno and exit code.
Error with_context(Error e, std::string_view context);

inline std::unexpected<Error> fail(Error e) { return std::unexpected<Error>(std::move(e)); }

}  // namespace unbounded
