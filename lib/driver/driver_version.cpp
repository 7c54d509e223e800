// Driver versions: what one looks like in a file name and in /proc/driver/nvidia/version, their order,
// and the loaded kernel module's.
#include "driver_discovery.hpp"

#include "format.hpp"
#include "fs.hpp"
#include "kernel_module.hpp"

#include <cctype>

namespace unbounded {

bool is_library_version(std::string_view v)
{
	std::size_t parts = 0;
	while (true) {
		auto dot = v.find('.');
		std::string_view part = v.substr(0, dot);
		if (!all_digits(part) || part.size() > 6)
			return false;
		parts++;
		if (dot == std::string_view::npos)
			break;
		v.remove_prefix(dot + 1);
	}
	return parts >= 2 && parts <= 3;
}

bool is_driver_version(std::string_view v)
{
	// NVIDIA driver branches have had three-digit majors for over a decade (R300 onwards); requiring
	// one keeps libfoo.so.1.2.13 of a host lib dir from ever looking like a driver file.
	return is_library_version(v) && v.find('.') >= 3;
}

std::optional<std::string> version_suffix(std::string_view name, std::string_view prefix)
{
	if (!name.starts_with(prefix))
		return std::nullopt;
	std::string_view v = name.substr(prefix.size());
	if (!is_driver_version(v))
		return std::nullopt;
	return std::string(v);
}

std::optional<std::string> parse_proc_version(std::string_view text)
{
	// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
	// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.10  Release Build  (...)"
	const std::string_view line = text.substr(0, text.find('\n'));
	if (!line.starts_with("NVRM version:"))
		return std::nullopt;
	auto km = line.find("Kernel Module");
	if (km == std::string_view::npos)
		return std::nullopt;
	// The words after it, split at each space (the empty ones between two spaces are no version).
	for (std::string_view rest = line.substr(km); !rest.empty();) {
		const auto sp = rest.find(' ');
		if (const std::string_view tok = rest.substr(0, sp); is_driver_version(tok))
			return std::string(tok);
		rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
	}
	return std::nullopt;
}

int compare_versions(std::string_view a, std::string_view b)
{
	auto next = [](std::string_view &s) -> long {
		auto dot = s.find('.');
		std::string_view p = s.substr(0, dot);
		s = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
		long v = 0;
		for (char c : p)
			if (std::isdigit(static_cast<unsigned char>(c)))
				v = v * 10 + (c - '0');
		return v;
	};
	while (!a.empty() || !b.empty()) {
		long x = next(a), y = next(b);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

KernelModule read_kernel_module(const Context &ctx)
{
	KernelModule m;
	auto text = fs::read_file(ctx.real(PROC_DRIVER_VERSION), 64 * 1024);
	if (!text) {
		m.unknown_reason = text.error().errnum == ENOENT ? std::string(PROC_DRIVER_VERSION) + " does not exist here"
								 : text.error().message;
		return m;
	}
	if (auto v = parse_proc_version(*text))
		m.version = *v;
	else
		m.unknown_reason = std::string("no driver version in ") + PROC_DRIVER_VERSION;
	return m;
}

}  // namespace unbounded
