#include "driver_generation.hpp"

#include "config.hpp"
#include "fs.hpp"
#include "state_format.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>

namespace unbounded {
namespace {

constexpr std::size_t MAX_RECORD_BYTES = 1 << 20;

std::string display(const char *name)
{
	return std::string(RUN_DIR) + "/" + name;
}

Result<std::optional<nlohmann::json>> read_json(int run_dir, const char *name)
{
	auto r = fs::read_trusted_at(run_dir, RUN_DIR, name, display(name), MAX_RECORD_BYTES);
	if (!r) {
		if (r.error().step == fs::TrustedStep::Open && r.error().error.errnum == ENOENT)
			return std::optional<nlohmann::json>();
		return fail(r.error().error);
	}
	auto j = nlohmann::json::parse(r->text, nullptr, false);
	if (j.is_discarded() || !j.is_object())
		return fail(make_error(display(name) + " is not a JSON object"));
	if (auto f = j.find("format"); f != j.end() && f->is_number_integer())
		if (auto newer = newer_state_format(f->get<long long>(), display(name)))
			return fail(make_error(*newer));
	return std::optional<nlohmann::json>(std::move(j));
}

template <typename T>
T field(const nlohmann::json &j, const char *key, T fallback)
{
	auto it = j.find(key);
	if (it == j.end())
		return fallback;
	try {
		return it->get<T>();
	} catch (const nlohmann::json::exception &) {
		return fallback;
	}
}

}  // namespace

std::string view_digest(const std::vector<std::string_view> &parts)
{
	// FNV-1a's constants, eight bytes a step (a byte a step cost a tenth of a millisecond on the
	// bench machine's specs, on every run): only compared with what this machine wrote this boot.
	std::uint64_t h = 0xcbf29ce484222325ull;
	auto mix = [&h](std::uint64_t w) {
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	};
	for (const auto &p : parts) {
		std::size_t i = 0;
		for (; i + 8 <= p.size(); i += 8) {
			std::uint64_t w;
			std::memcpy(&w, p.data() + i, 8);
			mix(w);
		}
		for (; i < p.size(); i++)
			mix(static_cast<unsigned char>(p[i]));
		mix(0x100 | p.size());  // "ab","c" is not "a","bc"
	}
	char out[17];
	std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
	return out;
}

Result<std::optional<DriverGeneration>> read_driver_generation(int run_dir)
{
	auto j = read_json(run_dir, DRIVER_GENERATION_FILE);
	if (!j)
		return fail(j.error());
	if (!*j)
		return std::optional<DriverGeneration>();
	DriverGeneration g;
	g.generation = field<std::uint64_t>(**j, "generation", 0);
	g.view = field<std::string>(**j, "view", "");
	g.driver_version = field<std::string>(**j, "driver_version", "");
	g.changed_at_ns = field<std::uint64_t>(**j, "changed_at_ns", 0);
	if (g.generation == 0)
		return fail(make_error(display(DRIVER_GENERATION_FILE) + " has no generation"));
	return std::optional<DriverGeneration>(g);
}

Advanced next_generation(const std::optional<DriverGeneration> &recorded, const std::string &view, const std::string &driver_version,
			 std::uint64_t now_ns)
{
	Advanced a;
	if (recorded && recorded->view == view) {
		a.current = *recorded;
		return a;
	}
	a.current.generation = recorded ? recorded->generation + 1 : 1;
	a.current.view = view;
	a.current.driver_version = driver_version;
	a.current.changed_at_ns = now_ns;
	a.changed = true;
	return a;
}

std::string generation_json(const DriverGeneration &g)
{
	nlohmann::json j = {{"format", STATE_FORMAT},
			    {"generation", g.generation},
			    {"view", g.view},
			    {"driver_version", g.driver_version},
			    {"changed_at_ns", g.changed_at_ns}};
	return j.dump(2) + "\n";
}

Result<std::optional<ConsumersRecord>> read_consumers_record(int run_dir)
{
	auto j = read_json(run_dir, CONSUMERS_FILE);
	if (!j)
		return fail(j.error());
	if (!*j)
		return std::optional<ConsumersRecord>();
	const auto &o = **j;
	ConsumersRecord r;
	r.generation = field<std::uint64_t>(o, "generation", 0);
	r.finished = field<bool>(o, "finished", false);
	r.runtime = field<std::string>(o, "runtime", "");
	r.runtime_warning = field<std::string>(o, "runtime_warning", "");
	if (auto it = o.find("consumers"); it != o.end() && it->is_array())
		for (const auto &c : *it) {
			if (!c.is_object())
				continue;
			r.consumers.push_back({field<std::string>(c, "namespace", ""), field<std::string>(c, "pod", ""),
					       field<std::string>(c, "pod_uid", ""), field<std::string>(c, "container", ""),
					       field<std::string>(c, "selector", ""), field<std::string>(c, "outcome", ""),
					       field<std::string>(c, "detail", "")});
		}
	if (auto it = o.find("restarts"); it != o.end() && it->is_object())
		for (const auto &[k, v] : it->items())
			if (v.is_number_unsigned())
				r.counts.emplace_back(k, v.get<std::uint64_t>());
	return std::optional<ConsumersRecord>(std::move(r));
}

std::string consumers_record_json(const ConsumersRecord &r)
{
	nlohmann::json consumers = nlohmann::json::array();
	for (const auto &c : r.consumers)
		consumers.push_back({{"namespace", c.pod_namespace},
				     {"pod", c.pod},
				     {"pod_uid", c.pod_uid},
				     {"container", c.container},
				     {"selector", c.matched},
				     {"outcome", c.outcome},
				     {"detail", c.detail}});
	nlohmann::json counts = nlohmann::json::object();
	for (const auto &[k, n] : r.counts)
		counts[k] = n;
	nlohmann::json j = {{"format", STATE_FORMAT}, {"generation", r.generation}, {"finished", r.finished}, {"runtime", r.runtime}, {"runtime_warning", r.runtime_warning}, {"consumers", consumers}, {"restarts", counts}};
	return j.dump(2) + "\n";
}

bool consumers_pending(const DriverGeneration &current, const std::optional<ConsumersRecord> &record)
{
	if (current.generation <= 1)
		return false;
	return !record || record->generation < current.generation || (record->generation == current.generation && !record->finished);
}

}  // namespace unbounded
