// Metrics for node_exporter's textfile collector: the Prometheus text format, written atomically
// (temp file + rename, so a scrape never sees half a file) into a directory the collector reads.
// Names follow the Prometheus conventions (units in the name, _total for counters, _info for
// labels-only gauges); labels never carry file contents or secrets.
#pragma once

#include "error.hpp"

#include <string>
#include <utility>
#include <vector>

namespace unbounded {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsText {
public:
	// HELP and TYPE lines are written once per name, before its first sample.
	void gauge(const std::string &name, const std::string &help, double value, const MetricLabels &labels = {})
	{
		sample(name, "gauge", help, value, labels);
	}
	void counter(const std::string &name, const std::string &help, double value, const MetricLabels &labels = {})
	{
		sample(name, "counter", help, value, labels);
	}
	const std::string &text() const { return text_; }

private:
	void sample(const std::string &name, const char *type, const std::string &help, double value, const MetricLabels &labels);
	std::string text_;
	std::vector<std::string> declared_;
};

// Writes `text` as `dir/name` (mode 0644) atomically, for a run that must not fail because of it: a
// missing directory (no node_exporter on this machine) is said at debug level, any other failure as
// a warning. `display_dir` names the directory in the messages.
void publish_metrics(const std::string &real_dir, const std::string &display_dir, const std::string &name, const std::string &text);

}  // namespace unbounded
