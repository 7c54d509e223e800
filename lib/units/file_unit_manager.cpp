// A service manager kept in a JSON file (unit_manager.hpp's open_file_manager): the tests' stand-in
// for PID 1 when the real binaries run on fake roots, so that verify's unit checks and refresh's
// start of what a failed setup held back are tested end to end without a booted machine.
#include "unit_manager.hpp"

#include "fs.hpp"

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace unbounded {
namespace {

class FileUnitManager final : public UnitManager {
public:
	explicit FileUnitManager(std::string path) : path_(std::move(path)) {}

	Result<UnitState> state(const std::string &unit) override
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		note(*doc, "state " + unit);
		UnitState s;
		s.load_state = "not-found";
		s.active_state = "inactive";
		s.sub_state = "dead";
		const auto &units = (*doc)["units"];
		if (units.contains(unit)) {
			const auto &u = units[unit];
			s.load_state = u.value("load_state", std::string("loaded"));
			s.active_state = u.value("active_state", std::string("inactive"));
			s.sub_state = u.value("sub_state", std::string(s.active_state == "active" ? "running" : "dead"));
			s.active_enter_usec = u.value("active_enter_usec", std::uint64_t{0});
			s.job_type = u.value("job_type", std::string());
		}
		if (auto r = save(*doc); !r)
			return fail(r.error());
		return s;
	}

	Result<void> start(const std::string &unit, Millis) override
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		note(*doc, "start " + unit);
		auto &u = (*doc)["units"][unit];
		const std::string result = u.value("start_result", std::string("done"));
		u["job_type"] = "";
		if (result == "done") {
			u["active_state"] = "active";
			u["sub_state"] = "running";
			u["active_enter_usec"] = std::chrono::duration_cast<std::chrono::microseconds>(
							 std::chrono::system_clock::now().time_since_epoch())
							 .count();
		}
		if (auto r = save(*doc); !r)
			return fail(r.error());
		if (result != "done")
			return fail(make_error("Start job of " + unit + " finished with result '" + result + "'"));
		return {};
	}

	Result<void> stop(const std::string &unit, Millis) override
	{
		auto doc = load();
		if (!doc)
			return fail(doc.error());
		note(*doc, "stop " + unit);
		(*doc)["units"][unit]["active_state"] = "inactive";
		return save(*doc);
	}

	Result<UnitStatus> status(const std::string &unit) override
	{
		auto s = state(unit);
		if (!s)
			return fail(s.error());
		UnitStatus st;
		st.active_state = s->active_state;
		st.sub_state = s->sub_state;
		st.active_enter_usec = s->active_enter_usec;
		return st;
	}

	Result<bool> system_stopping() override { return false; }

private:
	Result<nlohmann::json> load()
	{
		auto text = fs::read_file(path_, 1u << 20);
		if (!text)
			return fail(text.error());
		auto doc = nlohmann::json::parse(*text, nullptr, false);
		if (doc.is_discarded() || !doc.is_object())
			return fail(make_error(path_ + " is not a JSON object"));
		if (!doc.contains("units"))
			doc["units"] = nlohmann::json::object();
		return doc;
	}
	static void note(nlohmann::json &doc, const std::string &call) { doc["calls"].push_back(call); }
	Result<void> save(const nlohmann::json &doc)
	{
		auto w = fs::write_file_atomic(path_, doc.dump(1) + "\n");
		if (!w)
			return fail(w.error());
		return {};
	}

	std::string path_;
};

}  // namespace

Result<std::unique_ptr<UnitManager>> open_file_manager(const std::string &path)
{
	return std::unique_ptr<UnitManager>(std::make_unique<FileUnitManager>(path));
}

Result<std::unique_ptr<UnitManager>> unit_manager_for(const Context &ctx)
{
	if (ctx.root.empty() || ctx.root == "/")  // "/" is this system, as for every path (fs::root_path)
		return connect_system_manager();
	const char *fake = std::getenv("UNBOUNDED_NVIDIA_FAKE_UNITS");
	if (fake && *fake)
		return open_file_manager(fake);
	return std::unique_ptr<UnitManager>();
}

}  // namespace unbounded
