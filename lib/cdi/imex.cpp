#include "imex.hpp"

#include "bounded_parse.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "mig.hpp"

#include <algorithm>

namespace unbounded {

Result<std::vector<ImexChannel>> enumerate_imex_channels(const Context &ctx, CharMajors &majors, std::vector<std::string> &warnings)
{
	std::vector<ImexChannel> channels;
	auto dir = fs::open_dir(ctx.real(IMEX_CHANNEL_DIR));
	if (!dir) {
		if (dir.error().errnum != ENOENT)
			warnings.push_back("IMEX channels are not offered: " + dir.error().message);
		return channels;
	}
	auto names = fs::list_dir(dir->get(), IMEX_CHANNEL_DIR);
	if (!names) {
		warnings.push_back("IMEX channels are not offered: " + names.error().message);
		return channels;
	}
	std::optional<unsigned> major;
	if (const auto &known = majors.get())
		if (auto it = known->find("nvidia-caps-imex-channels"); it != known->end())
			major = it->second;
	// Without the major no node can be told from any other character device (channel1 made as 1:1 is
	// /dev/mem): every channel is left out, once, rather than published with rwm unchecked.
	if (!major) {
		if (!names->empty())
			warnings.push_back("IMEX channels are not offered: /proc/devices has no nvidia-caps-imex-channels major, so the nodes in " +
					   std::string(IMEX_CHANNEL_DIR) + " cannot be checked");
		return channels;
	}
	auto too_many = [&](const std::string &what) {
		return make_error(std::string(IMEX_CHANNEL_DIR) + " holds " + what + ", more than the " + std::to_string(MAX_IMEX_CHANNELS) +
					  " IMEX channels a spec is written for (the driver makes 2048 unless NVreg_ImexChannelCount says otherwise)",
				  EXIT_NOT_READY, E2BIG);
	};
	if (names->size() > 4 * MAX_IMEX_CHANNELS)  // not even looked at: each would cost a stat
		return fail(too_many(std::to_string(names->size()) + " entries"));
	for (const auto &name : *names) {
		const std::string path = std::string(IMEX_CHANNEL_DIR) + "/" + name;
		const auto id = numbered_name(name, "channel", 7, MAX_IMEX_CHANNEL + 1);  // "channel12" -> 12
		if (!id) {
			warnings.push_back("Ignoring " + printable(path) + ": not an IMEX channel name (channel0 .. channel" +
					   std::to_string(MAX_IMEX_CHANNEL) + ")");
			continue;
		}
		auto node = read_device_node(ctx, path);
		if (!node) {
			warnings.push_back("Ignoring IMEX channel " + path + ": not a character device");
			continue;
		}
		if (node->major != *major || node->minor != *id) {
			warnings.push_back("Ignoring IMEX channel " + path + ": it is " + std::to_string(node->major) + ":" +
					   std::to_string(node->minor) + ", expected " + std::to_string(*major) + ":" + std::to_string(*id));
			continue;
		}
		if (channels.size() == MAX_IMEX_CHANNELS)
			return fail(too_many("more than " + std::to_string(MAX_IMEX_CHANNELS) + " channels"));
		channels.push_back(ImexChannel{*id, *node});
	}
	std::sort(channels.begin(), channels.end(), [](const ImexChannel &a, const ImexChannel &b) { return a.id < b.id; });
	return channels;
}

}  // namespace unbounded
