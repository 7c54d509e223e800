// A CDI spec in /etc/cdi or /var/run/cdi (ours read back, or anyone's: a pod can write /var/run/cdi),
// through verify's reader: the file under a fake root, capped at MAX_SPEC_BYTES, parsed (YAML, JSON
// being YAML) with limits, structure-checked. Contract: a spec over the cap is one problem; every
// problem is one printable line; a document that parses round-trips through its JSON form to the
// same value.
#define FUZZ_NAME "cdi_spec"
#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "cdi_spec.hpp"
#include "context.hpp"

using namespace unbounded;

namespace {

void check(const Context &ctx, std::string_view text)
{
	fuzz::write_file(ctx.root + "/etc/cdi/nvidia.yaml", text);
	for (const auto &p : verify_cdi_spec(ctx, read_spec(ctx, "/etc/cdi/nvidia.yaml"), "535.104.05", nullptr, CDI_KIND))
		FUZZ_REQUIRE_LINE(p.message);
}

}  // namespace

FUZZ_TARGET
{
	const Context &ctx = fuzz::machine_context(FUZZ_NAME);
	static bool cap_checked = false;
	if (fuzz::over_cap_wanted(text, cap_checked)) {
		// The input made one byte too long: refused by the cap in one problem, whatever it holds.
		fuzz::write_file(ctx.root + "/etc/cdi/nvidia.yaml", fuzz::over_cap(text, MAX_SPEC_BYTES, '#'));
		auto p = verify_cdi_spec(ctx, read_spec(ctx, "/etc/cdi/nvidia.yaml"), "535.104.05", nullptr, CDI_KIND);
		FUZZ_REQUIRE(p.size() == 1 && p[0].message.find("larger than") != std::string::npos,
			     p.empty() ? "no problem" : p[0].message);
		FUZZ_REQUIRE_LINE(p[0].message);
	}
	check(ctx, text);

	auto doc = parse_yaml_bounded(text, "spec.yaml");
	if (!doc) {
		FUZZ_REQUIRE_LINE(doc.error().message);
		return 0;
	}
	std::string dumped;
	try {
		dumped = doc->dump();
	} catch (const nlohmann::json::exception &) {
		return 0;  // a string that is not UTF-8: JSON cannot carry it, the YAML parser keeps bytes
	}
	auto again = parse_yaml_bounded(dumped, "again.yaml");
	FUZZ_REQUIRE(again.has_value(), again ? dumped : again.error().message + " | " + dumped);
	FUZZ_REQUIRE(*again == *doc, dumped + " | " + again->dump());
	return 0;
}
