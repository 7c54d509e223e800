#include "cdi_model.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>

namespace unbounded {
namespace {

constexpr std::string_view VERSIONS[] = {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
static_assert(std::size(VERSIONS) > 0 && VERSIONS[std::size(VERSIONS) - 1] == CDI_NEWEST_VERSION);

struct FeatureFact {
	CdiFeature feature;
	std::string_view version, what;
};
constexpr FeatureFact FEATURES[] = {
	{CdiFeature::MountType, "0.4.0", "mount type"},
	{CdiFeature::DeviceNodeHostPath, "0.5.0", "deviceNodes hostPath"},
	{CdiFeature::DigitFirstName, "0.5.0", "device names starting with a digit"},
	{CdiFeature::Annotations, "0.6.0", "annotations"},
	{CdiFeature::DotInClass, "0.6.0", "a dot in the class name"},
	{CdiFeature::AdditionalGids, "0.7.0", "additionalGids"},
	{CdiFeature::IntelRdt, "0.7.0", "intelRdt"},
	{CdiFeature::NetDevices, "1.1.0", "netDevices"},
};

// The containerd releases at which the vendored CDI library (and so the newest cdiVersion accepted)
// changed, oldest first; a release takes the row of the last one at or before it.
struct Release {
	std::array<int, 3> version;
	std::string_view max_cdi;
};
constexpr Release CONTAINERD[] = {
	{{1, 7, 0}, "0.5.0"},
	{{1, 7, 12}, "0.6.0"},
	{{1, 7, 16}, "0.7.0"},
	{{1, 7, 27}, "0.8.0"},
	{{2, 0, 5}, "1.0.0"},
	{{2, 2, 1}, "1.1.0"},
};

bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool alnum(char c) { return letter(c) || (c >= '0' && c <= '9'); }

}  // namespace

bool known_cdi_version(std::string_view version)
{
	return std::find(std::begin(VERSIONS), std::end(VERSIONS), version) != std::end(VERSIONS);
}

int compare_cdi_versions(std::string_view a, std::string_view b)
{
	auto parse = [](std::string_view s) {
		std::array<int, 3> n{0, 0, 0};
		const char *p = s.data(), *end = s.data() + s.size();
		for (int &x : n) {
			p = std::from_chars(p, end, x).ptr;
			if (p != end && *p == '.')
				p++;
		}
		return n;
	};
	const auto x = parse(a), y = parse(b);
	return x < y ? -1 : x > y ? 1
				  : 0;
}

void CdiVersionNeed::add(CdiFeature feature)
{
	const auto *fact = std::find_if(std::begin(FEATURES), std::end(FEATURES), [&](const FeatureFact &f) { return f.feature == feature; });
	if (fact != std::end(FEATURES) && compare_cdi_versions(fact->version, version_) > 0) {
		version_ = fact->version;
		why_ = fact->what;
	}
}

bool valid_cdi_name(std::string_view name, bool device)
{
	if (name.empty() || !(device ? alnum(name.front()) : letter(name.front())) || !alnum(name.back()))
		return false;
	return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '_' || c == '-' || c == '.' || (device && c == ':'); });
}

bool cdi_kind_panics(std::string_view kind)
{
	auto one_letter = [](std::string_view part) { return part.size() == 1 && letter(part[0]); };
	const std::size_t slash = kind.find('/');
	if (slash == std::string_view::npos || slash == 0 || slash + 1 == kind.size())
		return one_letter(kind);
	return one_letter(kind.substr(0, slash)) || one_letter(kind.substr(slash + 1));
}

std::string max_cdi_version_for_containerd(int major, int minor, int patch)
{
	const std::array<int, 3> v{major, minor, patch};
	std::string_view max;
	for (const auto &r : CONTAINERD)
		if (r.version <= v)
			max = r.max_cdi;
	return std::string(max);
}

std::string first_containerd_for(std::string_view cdi_version)
{
	for (const auto &r : CONTAINERD)
		if (compare_cdi_versions(r.max_cdi, cdi_version) >= 0)
			return std::to_string(r.version[0]) + "." + std::to_string(r.version[1]) + "." + std::to_string(r.version[2]);
	return "";
}

std::string max_cdi_version_for_crio(int major, int minor)
{
	if (major > 1 || (major == 1 && minor >= 35))
		return "1.1.0";
	if (major == 1 && minor == 34)
		return "1.0.0";
	return "";
}

std::string max_cdi_version_for_library(std::string_view library_version)
{
	if (library_version.starts_with("v"))
		library_version.remove_prefix(1);
	if (const std::size_t colon = library_version.find(':'); colon != std::string_view::npos)
		library_version.remove_prefix(colon + 1);  // the epoch
	if (const std::size_t really = library_version.find("+really"); really != std::string_view::npos)
		library_version.remove_prefix(really + 7);  // Debian's spelling of a downgrade: the real version
	int major = -1, minor = -1;
	const char *p = library_version.data(), *end = p + library_version.size();
	auto r = std::from_chars(p, end, major);
	if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.')
		return "";
	r = std::from_chars(r.ptr + 1, end, minor);
	if (r.ec != std::errc() || major < 0 || minor < 0 || (major == 0 && minor < 5) || major > 99 || minor > 99)
		return "";
	return std::to_string(major) + "." + std::to_string(minor) + ".0";
}

}  // namespace unbounded
