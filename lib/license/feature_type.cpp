#include "feature_type.hpp"

#include "fs.hpp"

#include <cmath>
#include <cstdlib>

namespace unbounded {
namespace {

// How far a wall-clock step may move btime within one boot of the host.
constexpr double CLOCK_STEP_S = 600;

}  // namespace

int gridd_feature_type(std::string_view conf)
{
	std::string value = "0";
	while (!conf.empty()) {
		const auto nl = conf.find('\n');
		std::string line;
		for (char c : conf.substr(0, nl))
			if (c != ' ' && c != '\t' && c != '\r' && c != '\v' && c != '\f')
				line += c;
		conf = nl == std::string_view::npos ? std::string_view() : conf.substr(nl + 1);
		constexpr std::string_view KEY = "FeatureType=";
		if (!line.empty() && line[0] != '#' && line.starts_with(KEY) && line.size() > KEY.size())
			value = line.substr(KEY.size());
	}
	return value == "4" ? 4 : value == "2" ? 2
			  : value == "1"       ? 1
					       : 0;
}

std::string feature_type_text(int feature)
{
	const char *product = nullptr;
	switch (feature) {
	case 0: product = "unlicensed, NVIDIA Virtual Applications"; break;
	case 1: product = "NVIDIA vGPU"; break;
	case 2: product = "NVIDIA RTX Virtual Workstation"; break;
	case 4: product = "NVIDIA Virtual Compute Server"; break;
	default: break;
	}
	return "FeatureType=" + std::to_string(feature) + (product ? std::string(" (") + product + ")" : std::string());
}

bool HostBoot::same_as(const HostBoot &earlier) const
{
	return known() && earlier.known() && uptime >= earlier.uptime && std::fabs(static_cast<double>(btime - earlier.btime)) <= CLOCK_STEP_S;
}

HostBoot host_boot(const Context &ctx)
{
	HostBoot b;
	auto stat = fs::read_file(ctx.real("/proc/stat"), 1 << 20);
	auto uptime = fs::read_file(ctx.real("/proc/uptime"), 4096);
	if (!stat || !uptime)
		return b;
	const auto at = stat->find("\nbtime ");
	if (at == std::string::npos)
		return b;
	const long long btime = std::strtoll(stat->c_str() + at + 7, nullptr, 10);
	const double up = std::strtod(uptime->c_str(), nullptr);
	if (btime <= 0 || !std::isfinite(up) || up < 0)
		return b;
	b.btime = btime;
	b.uptime = up;
	return b;
}

}  // namespace unbounded
