#include "feature_type.hpp"

#include "fs.hpp"

#include <charconv>

namespace unbounded {

std::optional<int> gridd_feature_type(std::string_view conf)
{
	std::optional<int> feature = 0;
	while (!conf.empty()) {
		const auto nl = conf.find('\n');
		std::string line;
		for (char c : conf.substr(0, nl))
			if (c != ' ' && c != '\t' && c != '\r' && c != '\v' && c != '\f')
				line += c;
		conf = nl == std::string_view::npos ? std::string_view() : conf.substr(nl + 1);
		constexpr std::string_view KEY = "FeatureType=";
		if (line.empty() || line[0] == '#' || !line.starts_with(KEY) || line.size() == KEY.size())
			continue;
		int v = 0;
		const char *first = line.data() + KEY.size(), *last = line.data() + line.size();
		auto [end, ec] = std::from_chars(first, last, v);
		feature = ec == std::errc() && end == last && v >= 0 ? std::optional<int>(v) : std::nullopt;
	}
	return feature;
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

std::string host_boot(const Context &ctx)
{
	auto text = fs::read_file(ctx.real("/proc/stat"), 1 << 20);
	if (!text)
		return {};
	const auto at = text->find("\nbtime ");
	if (at == std::string::npos)
		return {};
	const auto begin = at + 7, end = text->find('\n', begin);
	std::string v = text->substr(begin, end == std::string::npos ? std::string::npos : end - begin);
	return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos ? v : std::string();
}

}  // namespace unbounded
