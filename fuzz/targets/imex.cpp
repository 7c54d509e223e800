// The IMEX channel nodes: /dev/nvidia-caps-imex-channels/<name> for each line of the input (regular
// files, as a hostile or broken host may bind), with /proc/devices from the first lines after a
// "---" line. Contract: no entry that is not a character device is taken; each warning and the
// error are one printable line.
#define FUZZ_NAME "imex"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "imex.hpp"
#include "mig.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	static const Context ctx = [] {
		Context c;
		c.root = fuzz::scratch() + "/root";
		return c;
	}();
	const std::string dir = ctx.root + IMEX_CHANNEL_DIR;
	fuzz::reset_dir(dir);
	std::string_view names = text, devices;
	if (auto sep = text.find("\n---\n"); sep != std::string_view::npos) {
		names = text.substr(0, sep);
		devices = text.substr(sep + 5);
	}
	fuzz::reset_dir(ctx.root + "/proc");
	if (!devices.empty())
		fuzz::write_file(ctx.root + "/proc/devices", devices);
	std::size_t made = 0;
	for (std::size_t pos = 0; pos < names.size() && made < 64;) {
		auto nl = names.find('\n', pos);
		std::string name(names.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
		pos = nl == std::string_view::npos ? names.size() : nl + 1;
		if (name.empty() || name.size() > 200 || name.find('/') != std::string::npos || name.find('\0') != std::string::npos ||
		    name == "." || name == "..")
			continue;
		(void)fuzz::try_write_file(dir + "/" + name, "");
		made++;
	}
	CharMajors majors(ctx);
	std::vector<std::string> warnings;
	auto channels = enumerate_imex_channels(ctx, majors, warnings);
	for (const auto &w : warnings)
		FUZZ_REQUIRE_LINE(w);
	if (!channels) {
		FUZZ_REQUIRE_LINE(channels.error().message);
		return 0;
	}
	FUZZ_REQUIRE(channels->empty(), "a regular file was taken as channel " + std::to_string(channels->front().id));
	return 0;
}
