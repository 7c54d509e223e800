#include "follow.hpp"

#include "bounded_parse.hpp"
#include "cdi_check.hpp"
#include "driver_generation.hpp"
#include "format.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "message_ids.hpp"
#include "metrics.hpp"
#include "sd_protocols.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace unbounded {
namespace {

constexpr Millis POLL{1000};

struct Target {
	PodInfo pod;
	ContainerInfo container;
	const ConsumerSelector *selector;
	ConsumerRestart restart;
	bool back = false;
	std::string stop_error;  // the stop failed (or timed out): "stop-failed" unless it came back anyway
};

std::string who(const Target &t)
{
	return printable(t.pod.pod_namespace) + "/" + printable(t.pod.name) + " (container " + printable(t.container.name) + ")";
}

// The containers of the matching pods that were created before the generation began: they read the
// root or the specs as they were.
Result<std::vector<Target>> stale_consumers(const ConsumersConfig &cc, Runtime &runtime, std::uint64_t since_ns)
{
	std::vector<Target> out;
	std::set<std::string> seen;  // a pod matched by two selectors is one consumer
	for (const auto &sel : cc.selectors) {
		auto pods = runtime.ready_pods(sel.labels);
		if (!pods)
			return fail(pods.error());
		for (const auto &pod : *pods) {
			if (!cc.in_namespace(pod.pod_namespace) || !seen.insert(pod.id).second)
				continue;
			auto containers = runtime.running_containers(pod.id);
			if (!containers)
				return fail(containers.error());
			for (const auto &c : *containers)
				if (c.created_at >= 0 && static_cast<std::uint64_t>(c.created_at) < since_ns)
					out.push_back({pod, c, &sel, {}, false, {}});
		}
	}
	return out;
}

// Back: a running container of the same name in the same pod (its UID) other than the one stopped;
// or, when that pod is gone, in a pod of the same namespace and selector that its DaemonSet made
// instead, created after the generation began.
bool came_back(Runtime &runtime, const Target &t, std::uint64_t since_ns)
{
	auto pods = runtime.ready_pods(t.selector->labels);
	if (!pods)
		return false;
	const bool same_pod_there = std::any_of(pods->begin(), pods->end(), [&](const PodInfo &p) { return printable(p.uid) == t.restart.pod_uid; });
	for (const auto &pod : *pods) {
		const bool same = printable(pod.uid) == t.restart.pod_uid;
		if (pod.pod_namespace != t.pod.pod_namespace || (same_pod_there && !same))
			continue;
		auto containers = runtime.running_containers(pod.id);
		if (!containers)
			continue;
		for (const auto &c : *containers) {
			if (printable(c.name) != t.restart.container || c.id == t.container.id)
				continue;
			if (same || (c.created_at >= 0 && static_cast<std::uint64_t>(c.created_at) >= since_ns))
				return true;
		}
	}
	return false;
}

// The device plugin's spec names the current root's files (or there is none: the plugin is not in a
// CDI mode, or not on this node).
bool device_plugin_current(const Context &ctx, const std::string &driver_version)
{
	return verify_device_plugin_spec(ctx, ctx.config.device_plugin_spec, driver_version).empty();
}

void count(ConsumersRecord &r, const std::string &container, const std::string &outcome)
{
	const std::string key = container + "\t" + outcome;
	auto it = std::find_if(r.counts.begin(), r.counts.end(), [&](const auto &p) { return p.first == key; });
	if (it == r.counts.end())
		r.counts.emplace_back(key, 1);
	else
		it->second++;
}

// This program's one file in the run directory (setup's executor writes the others). A failure to
// write it is a warning, `then` added to it.
void save_record(int run_dir, const ConsumersRecord &r, const std::string &then = "")
{
	auto w = fs::write_file_atomic_at(run_dir, CONSUMERS_FILE, std::string(RUN_DIR) + "/" + CONSUMERS_FILE, consumers_record_json(r),
					  {.mode = 0644, .fsync = false, .skip_if_unchanged = false});
	if (!w)
		log::warning(w.error().message + then);
}

void record_metrics(const Context &ctx, const ConsumersRecord &r)
{
	MetricsText m;
	m.gauge("unbounded_nvidia_consumers_generation", "The driver root generation the GPU consumers last followed", static_cast<double>(r.generation));
	m.gauge("unbounded_nvidia_consumers_runtime_unreachable", "1 when the container runtime could not be asked to restart the GPU consumers",
		r.runtime_warning.empty() ? 0 : 1);
	for (const auto &[key, n] : r.counts) {
		const auto tab = key.find('\t');
		m.counter("unbounded_nvidia_consumer_restarts_total", "GPU consumer containers restarted after a driver change, by container and outcome, this boot",
			  static_cast<double>(n), {{"consumer", key.substr(0, tab)}, {"outcome", tab == std::string::npos ? "" : key.substr(tab + 1)}});
	}
	publish_metrics(ctx.real(ctx.config.metrics_dir), ctx.config.metrics_dir, "unbounded-nvidia-consumers.prom", m.text());
}

void finish(const Context &ctx, int run_dir, ConsumersRecord &r)
{
	r.finished = true;
	save_record(run_dir, r, ", verify cannot tell that the consumers followed");
	record_metrics(ctx, r);
}

// One run for one generation: the record it keeps, the containers it restarts.
class FollowRun {
public:
	FollowRun(const Context &ctx, int run_dir, Runtime &runtime, const DriverGeneration &g, ConsumersRecord &r)
		: ctx_(ctx), cc_(ctx.config.consumers), run_dir_(run_dir), runtime_(runtime), g_(g), r_(r)
	{
	}

	// The stale containers, less those an earlier run of this generation stopped already (killed in
	// the middle): those are waited for, never stopped again.
	Result<void> find()
	{
		auto stale = stale_consumers(cc_, runtime_, g_.changed_at_ns);
		if (!stale)
			return fail(stale.error());
		for (auto &t : *stale)
			if (!recorded(t.pod.uid, t.container.name))
				targets_.push_back(std::move(t));
		for (const auto &c : r_.consumers)
			if (c.outcome.empty())
				resumed(c);
		return {};
	}

	void stop_each()
	{
		notify_status("Restarting " + std::to_string(targets_.size()) + " GPU consumer container(s) for driver " + g_.driver_version);
		for (auto &t : targets_) {
			if (!t.restart.pod_uid.empty())
				continue;  // stopped by the run before
			t.restart = {printable(t.pod.pod_namespace), printable(t.pod.name), printable(t.pod.uid), printable(t.container.name),
				     t.selector->text, "", ""};
			log::notice("Restarting the GPU consumer " + who(t) + " on driver " + g_.driver_version + ", which it started before.",
				    {{"MESSAGE_ID", message_id::CONSUMER_RESTARTED},
				     {"UNBOUNDED_NVIDIA_CONSUMER", t.restart.pod_namespace + "/" + t.restart.pod},
				     {"UNBOUNDED_NVIDIA_CONTAINER", t.restart.container},
				     {"UNBOUNDED_NVIDIA_DRIVER_VERSION", g_.driver_version}});
			// A stop that failed or timed out may still have happened: it is waited for as any.
			if (auto s = runtime_.stop(t.container.id, cc_.stop_timeout); !s)
				t.stop_error = s.error().message;
			// Recorded before the wait: a run killed now must not stop this one again.
			r_.consumers.push_back(t.restart);
			save_record(run_dir_, r_);
		}
	}

	// Until each is running again and the device plugin wrote a spec for the new root, or consumers.wait
	// (by the clock, the runtime's answers included). Nothing stopped: nothing to wait for.
	bool wait_for_them(const FollowSeams &seams)
	{
		bool plugin_current = device_plugin_current(ctx_, g_.driver_version);
		if (targets_.empty())
			return plugin_current;
		const auto deadline = std::chrono::steady_clock::now() + cc_.wait;
		for (;;) {
			for (auto &t : targets_)
				if (!t.back && t.selector && came_back(runtime_, t, g_.changed_at_ns))
					t.back = true;
			if (!plugin_current)
				plugin_current = device_plugin_current(ctx_, g_.driver_version);
			const bool all_back = std::all_of(targets_.begin(), targets_.end(), [](const Target &t) { return t.back; });
			if ((all_back && plugin_current) || std::chrono::steady_clock::now() >= deadline)
				return plugin_current;
			seams.sleep(POLL);
		}
	}

	// Each one's outcome, recorded, counted and said. Returns how many are running again.
	std::size_t judge()
	{
		std::size_t restarted = 0;
		for (auto &t : targets_) {
			ConsumerRestart &c = t.restart;
			if (c.outcome.empty())
				c.outcome = t.back ? "restarted" : !t.stop_error.empty() ? "stop-failed"
											 : "not-back";
			if (c.outcome == "stop-failed")
				c.detail = t.stop_error;
			else if (c.outcome == "not-back")
				c.detail = "no running container " + c.container + " in a ready pod matching " + c.matched + " after " +
					   format_duration(cc_.wait) + " (consumers.wait)";
			for (auto &kept : r_.consumers)
				if (kept.pod_uid == c.pod_uid && kept.container == c.container)
					kept = c;
			count(r_, c.container, c.outcome);
			if (c.outcome == "restarted") {
				restarted++;
				continue;
			}
			log::error("The GPU consumer " + c.pod_namespace + "/" + c.pod + " (container " + c.container + ") " +
					   (c.outcome == "stop-failed" ? "could not be restarted" : "did not run again") + " for driver " +
					   g_.driver_version + ": " + c.detail + ". It is not restarted again.",
				   {{"MESSAGE_ID", message_id::CONSUMER_NOT_BACK},
				    {"UNBOUNDED_NVIDIA_CONSUMER", c.pod_namespace + "/" + c.pod},
				    {"UNBOUNDED_NVIDIA_CONTAINER", c.container},
				    {"UNBOUNDED_NVIDIA_DRIVER_VERSION", g_.driver_version}});
		}
		return restarted;
	}

	std::size_t size() const { return targets_.size(); }

private:
	bool recorded(const std::string &uid, const std::string &container) const
	{
		return std::any_of(r_.consumers.begin(), r_.consumers.end(),
				   [&](const ConsumerRestart &c) { return c.pod_uid == printable(uid) && c.container == printable(container); });
	}

	void resumed(const ConsumerRestart &c)
	{
		auto sel = std::find_if(cc_.selectors.begin(), cc_.selectors.end(), [&](const ConsumerSelector &s) { return s.text == c.matched; });
		Target t{{"", c.pod_uid, c.pod, c.pod_namespace}, {"", c.container, "", 0}, sel == cc_.selectors.end() ? nullptr : &*sel, c, false, {}};
		if (!t.selector) {  // its selector is gone from the configuration: nothing to wait on
			t.restart.outcome = "not-back";
			t.restart.detail = "its selector " + c.matched + " is no longer in consumers.selectors";
		}
		targets_.push_back(std::move(t));
	}

	const Context &ctx_;
	const ConsumersConfig &cc_;
	int run_dir_;
	Runtime &runtime_;
	const DriverGeneration &g_;
	ConsumersRecord &r_;
	std::vector<Target> targets_;
};

// Nothing restarted: the runtime could not be asked. A warning. Without a runtime socket at all there
// is nothing to restart, and the generation is done with; a runtime that is down or does not answer
// may hold consumers of the old driver, so the record stays unfinished: verify says so, naming it, and
// the next refresh asks again.
int unreachable_runtime(const Context &ctx, int run_dir, ConsumersRecord &r, const DriverGeneration &g, const std::string &socket,
			const std::string &why)
{
	r.runtime_warning = "The GPU consumers were not restarted for driver " + g.driver_version + ": " + why;
	log::warning(r.runtime_warning, {{"MESSAGE_ID", message_id::CONSUMERS_RUNTIME_UNREACHABLE}, {"UNBOUNDED_NVIDIA_RUNTIME", socket}});
	if (socket.empty()) {
		finish(ctx, run_dir, r);
		return EXIT_READY;
	}
	save_record(run_dir, r);
	record_metrics(ctx, r);
	return EXIT_READY;
}

}  // namespace

std::string runtime_socket(const Context &ctx)
{
	if (!ctx.config.consumers.runtime_endpoint.empty())
		return ctx.config.consumers.runtime_endpoint;
	for (const char *s : {"/run/containerd/containerd.sock", "/run/crio/crio.sock"}) {
		struct stat st = {};
		if (::stat(ctx.real(s).c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
			return s;
	}
	return "";
}

namespace {

// One generation's restarts: the consumers that predate `g`.
int follow_generation(const Context &ctx, int run_dir, Runtime *runtime, const std::string &socket, const std::string &unreachable,
		      const FollowSeams &seams, const DriverGeneration &g)
{
	auto old = read_consumers_record(run_dir);
	if (!old)
		log::warning(old.error().message + ", starting a new record");
	const std::optional<ConsumersRecord> previous = old ? *old : std::nullopt;
	if (!consumers_pending(g, previous)) {
		log::info("The GPU consumers follow driver root generation " + std::to_string(g.generation) + " already.");
		return EXIT_READY;
	}
	ConsumersRecord r;
	r.generation = g.generation;
	r.runtime = socket;
	if (previous) {
		r.counts = previous->counts;
		if (previous->generation == g.generation)
			r.consumers = previous->consumers;
	}
	if (!runtime)
		return unreachable_runtime(ctx, run_dir, r, g, socket, unreachable);
	save_record(run_dir, r);
	FollowRun run(ctx, run_dir, *runtime, g, r);
	if (auto found = run.find(); !found)
		return unreachable_runtime(ctx, run_dir, r, g, socket, found.error().message);
	run.stop_each();
	const bool plugin_current = run.wait_for_them(seams);
	const std::size_t restarted = run.judge();
	if (!plugin_current)
		log::warning("The NVIDIA device plugin's spec " + ctx.config.device_plugin_spec + " still does not match driver " + g.driver_version +
			     " after " + format_duration(ctx.config.consumers.wait) + " (consumers.wait)");
	finish(ctx, run_dir, r);
	const std::string summary = run.size() == 0 ? "No GPU consumer predates driver root generation " + std::to_string(g.generation) + "."
						    : std::to_string(restarted) + " of " + std::to_string(run.size()) +
							      " GPU consumer container(s) restarted on driver " + g.driver_version + ".";
	log::info(summary);
	notify_status(summary);
	return restarted == run.size() ? EXIT_READY : EXIT_NOT_READY;
}

}  // namespace

int follow_consumers(const Context &ctx, int run_dir, Runtime *runtime, const std::string &socket, const std::string &unreachable,
		     const FollowSeams &seams)
{
	// A refresh that began a later generation while this ran queued this unit again, and that start
	// merged into this run: the later generation is taken here (a few times at most).
	int rc = EXIT_READY;
	std::uint64_t done = 0;
	for (int pass = 0; pass < 3; pass++) {
		auto generation = read_driver_generation(run_dir);
		if (!generation) {
			log::error(generation.error().message);
			return EXIT_NOT_READY;
		}
		if (!*generation) {
			log::info("No driver root generation is recorded: nothing for the GPU consumers to follow.");
			return rc;
		}
		if ((*generation)->generation <= done)
			break;
		done = (*generation)->generation;
		rc = follow_generation(ctx, run_dir, runtime, socket, unreachable, seams, **generation);
	}
	return rc;
}

}  // namespace unbounded
