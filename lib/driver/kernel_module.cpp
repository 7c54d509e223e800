#include "kernel_module.hpp"

#include "driver_discovery.hpp"
#include "fs.hpp"

namespace unbounded {

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
