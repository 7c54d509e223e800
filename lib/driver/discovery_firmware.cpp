// The GSP firmware of the driver's version, and the warning when a driver that ships it has none staged.
#include "discovery.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "staging_layout.hpp"

#include <cstdlib>

namespace unbounded {

using staging_layout::FIRMWARE_DIRS;

// 6. The GSP firmware of this version.
Result<void> Discovery::add_firmware()
{
	for (std::size_t t = 0; t < st_.trees().size(); t++) {
		for (const char *base : FIRMWARE_DIRS) {
			std::string dir = fs::join(base, out_.version);
			auto names = st_.list(t, dir);
			if (!names)
				return fail(names.error());
			for (const auto &n : *names) {
				if (!n.ends_with(".bin"))
					continue;
				const std::string display = fs::join(st_.trees()[t].display, fs::join(dir, n));
				if (!is_plain_file_name(n)) {
					out_.warnings.push_back("Skipping firmware " + printable(display) + ", its name has characters no driver file has");
					continue;
				}
				auto src = resolve_regular(Entry{t, fs::join(dir, n), n, false, display});
				if (!src)
					return fail(src.error());
				add(DriverFile{FileKind::Firmware, "lib/firmware/nvidia/" + out_.version + "/" + n, std::move(*src), std::nullopt, {}});
			}
		}
	}
	return {};
}

// 6b. A driver that ships GSP firmware without it in the root: GPUs that run the GSP (the open
// kernel module, and the default on recent GPUs) then fail to initialise in containers that need
// it. Said, not fatal: many machines never load it from here.
Result<void> Discovery::check_firmware()
{
	const bool have = std::any_of(by_dest_.begin(), by_dest_.end(), [](const auto &f) { return f.second.kind == FileKind::Firmware; });
	const long major = std::strtol(out_.version.c_str(), nullptr, 10);
	if (!have && major >= staging_layout::FIRST_GSP_DRIVER_MAJOR)
		out_.warnings.push_back("No GSP firmware for driver " + out_.version + " in the staging mounts (" + where() +
					"): bind the host's /lib/firmware/nvidia as a staging mount");
	return {};
}

}  // namespace unbounded
