// nvidia-gridd's journal messages, one per line of the input, each 60 s after the last. Contract:
// an expiry is a real time (2000 or later) and only an acquisition has one; the derived state's
// name is one of the known states.
#define FUZZ_NAME "gridd_journal"
#include "fuzz_target.hpp"

#include "license_state.hpp"

using namespace unbounded;

FUZZ_TARGET
{
	std::vector<GriddLine> lines;
	std::uint64_t t = 1'700'000'000'000'000;
	for (std::size_t pos = 0; pos <= text.size() && lines.size() < 1000;) {
		auto nl = text.find('\n', pos);
		std::string_view m = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
		pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
		auto meaning = classify_gridd_line(m);
		if (meaning.expiry)
			FUZZ_REQUIRE(*meaning.expiry >= 946684800, std::string(m));
		FUZZ_REQUIRE(!meaning.expiry || meaning.kind == GriddLineMeaning::Kind::Acquired, std::string(m));
		if (auto e = parse_gridd_expiry(m))
			FUZZ_REQUIRE(*e >= 946684800, std::string(m));
		lines.push_back(GriddLine{t += 60'000'000, std::string(m)});
	}
	LicenseObservation o;
	o.state = LicenseState::Pending;
	for (const auto &line : lines)
		take_gridd_line(o, line);
	return 0;
}
