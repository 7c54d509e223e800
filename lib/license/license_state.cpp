#include "license_state.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

namespace unbounded {
namespace {

std::string lower(std::string_view s)
{
	std::string out(s);
	std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
	return out;
}

bool has(const std::string &text, std::string_view needle) { return text.find(needle) != std::string::npos; }

// nvidia-gridd's messages, as NVIDIA's Virtual GPU Client Licensing User Guide ("Verifying the NVIDIA
// vGPU Software License on a Linux VM", and the licensing events it lists) and reports from the field
// show them. Versions differ in wording, so each is matched on the words that carry the meaning,
// case-insensitively:
//   "License acquired successfully. (Info: <server>, <product>; Expiry: <date> GMT)"   (vGPU 13 on, NLS)
//   "License acquired successfully. (Info: http://10.31.20.45:7070/request; GRID-Virtual-WS,2.0)"
//                                                             (legacy license server: no expiry)
//   "License renewed successfully. (Info: <server>, <product>; Expiry: <date> GMT)"   (each renewal)
//   "Failed to acquire license from <server>"   (NVIDIA/nvidia-docker issue 1787, 525.105.17)
//   "Valid GRID license not found. GPU features and performance will be restricted. ..."
//   "License expired" / "License has expired", "Unlicensed (Restricted)"
//   "License returned successfully."            (it gave the license back, as at a stop)
//   "Failed to renew license from <server>", "License renewal failed" (the guide's renewal events: the
//                                                client keeps the lease until its expiry and retries)
// Startup lines ("Started (1976)", "vGPU Software package (1)", "Platform detection successful (2)",
// bottlerocket-kernel-kit PR 285) and configuration complaints say nothing about the license yet.
bool acquired(const std::string &m)
{
	return (has(m, "license acquired") || has(m, "license renewed") || has(m, "acquired license")) && has(m, "success");
}

bool renewal_failed(const std::string &m)
{
	return has(m, "failed to renew") || has(m, "unable to renew") || has(m, "renewal failed") || has(m, "license renewal fail");
}

bool not_licensed(const std::string &m)
{
	return has(m, "failed to acquire") || has(m, "unable to acquire") || (has(m, "license not found") && has(m, "valid")) ||
	       has(m, "license expired") || has(m, "license has expired") || has(m, "unlicensed") || has(m, "license returned") ||
	       has(m, "license lost");
}

// Up to 4 digits from `s` at `pos`, then `sep` (skipped); nullopt when not there.
std::optional<int> field(std::string_view s, std::size_t &pos, char sep)
{
	int v = 0;
	const std::size_t start = pos;
	while (pos < s.size() && pos - start < 4 && std::isdigit(static_cast<unsigned char>(s[pos])))
		v = v * 10 + (s[pos++] - '0');
	if (pos == start)
		return std::nullopt;
	if (sep) {
		if (pos >= s.size() || s[pos] != sep)
			return std::nullopt;
		pos++;
	}
	return v;
}

}  // namespace

const char *license_state_name(LicenseState s)
{
	switch (s) {
	case LicenseState::Licensed: return "licensed";
	case LicenseState::Unlicensed: return "unlicensed";
	case LicenseState::Pending: return "pending";
	case LicenseState::Unknown: break;
	}
	return "unknown";
}

std::optional<LicenseState> license_state_from_name(std::string_view name)
{
	for (auto s : ALL_LICENSE_STATES)
		if (name == license_state_name(s))
			return s;
	return std::nullopt;
}

std::optional<std::int64_t> parse_gridd_expiry(std::string_view message)
{
	const std::string m = lower(message);
	auto at = m.find("expiry:");
	if (at == std::string::npos)
		return std::nullopt;
	std::size_t pos = at + 7;
	while (pos < m.size() && m[pos] == ' ')
		pos++;
	std::string_view s(m);
	auto y = field(s, pos, '-'), mo = field(s, pos, '-'), d = field(s, pos, ' ');
	auto h = field(s, pos, ':'), mi = field(s, pos, ':'), se = field(s, pos, 0);
	if (!y || !mo || !d || !h || !mi || !se || *y < 2000 || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *se > 60)
		return std::nullopt;
	const std::string_view zone = s.substr(pos, 4);
	if (zone != " gmt" && zone != " utc")
		return std::nullopt;
	std::tm tm{};
	tm.tm_year = *y - 1900;
	tm.tm_mon = *mo - 1;
	tm.tm_mday = *d;
	tm.tm_hour = *h;
	tm.tm_min = *mi;
	tm.tm_sec = *se;
	return static_cast<std::int64_t>(::timegm(&tm));
}

GriddLineMeaning classify_gridd_line(std::string_view message)
{
	const std::string m = lower(message);
	GriddLineMeaning r;
	if (acquired(m)) {
		r.kind = GriddLineMeaning::Kind::Acquired;
		r.expiry = parse_gridd_expiry(message);
	} else if (renewal_failed(m)) {
		r.kind = GriddLineMeaning::Kind::RenewalFailed;
	} else if (not_licensed(m)) {
		r.kind = GriddLineMeaning::Kind::NotLicensed;
	}
	return r;
}

void take_gridd_line(LicenseObservation &o, const GriddLine &line)
{
	const auto meaning = classify_gridd_line(line.message);
	switch (meaning.kind) {
	case GriddLineMeaning::Kind::Nothing: return;
	case GriddLineMeaning::Kind::RenewalFailed:
		if (o.state == LicenseState::Licensed && o.expiry)
			return;  // still held until its expiry
		[[fallthrough]];
	case GriddLineMeaning::Kind::NotLicensed:
		o.state = LicenseState::Unlicensed;
		o.expiry.reset();
		break;
	case GriddLineMeaning::Kind::Acquired:
		o.state = LicenseState::Licensed;
		o.expiry = meaning.expiry;
		break;
	}
	o.since_usec = line.realtime_usec;
}

}  // namespace unbounded
