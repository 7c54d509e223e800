// The IMEX channel nodes: /dev/nvidia-caps-imex-channels/<name> for each line of the input (regular
// files, as a hostile or broken host may bind), with /proc/devices from the first lines after a
// "---" line. Contract: no entry that is not a character device is taken; each warning and the
// error are one printable line. Cap: a /proc/devices over 64 KiB gives no major, so nothing is
// taken and the entries are left out in one line. (The directory's own cap, 4 * MAX_IMEX_CHANNELS
// entries, is not checked here: 32,769 files cost a first input over libFuzzer's 10 s timeout.)
#define FUZZ_NAME "imex"
#include "fuzz_target.hpp"

#include "context.hpp"
#include "imex.hpp"
#include "mig.hpp"

#include <filesystem>

using namespace unbounded;

namespace {

constexpr std::size_t MAX_PROC_DEVICES_BYTES = 64 * 1024;  // CharMajors' read (mig.cpp)

}  // namespace

FUZZ_TARGET
{
	const Context &ctx = fuzz::machine_context(FUZZ_NAME);
	const std::string dir = ctx.root + IMEX_CHANNEL_DIR;
	fuzz::reset_dir(dir);
	std::string_view names = text, devices;
	if (auto sep = text.find("\n---\n"); sep != std::string_view::npos) {
		names = text.substr(0, sep);
		devices = text.substr(sep + 5);
	}
	fuzz::reset_dir(ctx.root + "/proc");
	if (!devices.empty())
		fuzz::write_file(ctx.root + PROC_DEVICES, devices);
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
	{
		CharMajors majors(ctx);
		std::vector<std::string> warnings;
		auto channels = enumerate_imex_channels(ctx, majors, warnings);
		for (const auto &w : warnings)
			FUZZ_REQUIRE_LINE(w);
		if (!channels)
			FUZZ_REQUIRE_LINE(channels.error().message);
		else
			FUZZ_REQUIRE(channels->empty(), "a regular file was taken as channel " + std::to_string(channels->front().id));
	}
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		// The same entries with /proc/devices one byte over its cap: no major, so none is looked at.
		fuzz::write_file(ctx.root + PROC_DEVICES, fuzz::over_cap(devices, MAX_PROC_DEVICES_BYTES, '\n'));
		CharMajors majors(ctx);
		std::vector<std::string> warnings;
		auto channels = enumerate_imex_channels(ctx, majors, warnings);
		FUZZ_REQUIRE(channels && channels->empty(), channels ? "a channel was taken" : channels.error().message);
		for (const auto &w : warnings)
			FUZZ_REQUIRE_LINE(w);
		const bool any = !std::filesystem::is_empty(dir);
		FUZZ_REQUIRE(warnings.size() == (any ? 1u : 0u), std::to_string(warnings.size()) + " warnings");
	}
	return 0;
}
