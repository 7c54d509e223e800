#include "metrics.hpp"

#include "fs.hpp"
#include "log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace unbounded {

namespace {

// "a\"b\\c\nd" as a label value: backslash, double quote and newline escaped.
std::string escape_label_value(const std::string &v)
{
	std::string out;
	for (char c : v) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

std::string number(double v)
{
	if (std::isnan(v))
		return "NaN";
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%.15g", v);  // an integer below 1e15 whole, a Unix time with its milliseconds
	return buf;
}

}  // namespace

void MetricsText::sample(const std::string &name, const char *type, const std::string &help, double value, const MetricLabels &labels)
{
	if (std::find(declared_.begin(), declared_.end(), name) == declared_.end()) {
		declared_.push_back(name);
		text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
	}
	text_ += name;
	if (!labels.empty()) {
		text_ += "{";
		for (std::size_t i = 0; i < labels.size(); i++)
			text_ += (i ? "," : "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
		text_ += "}";
	}
	// Appended piece by piece: `" " + std::string&&` prepends into the temporary, which g++ 12 at -O3
	// reports as a -Wrestrict overlap that cannot happen (GCC PR 105329); building no temporary also
	// copies less.
	text_ += ' ';
	text_ += number(value);
	text_ += '\n';
}

void publish_metrics(const std::string &real_dir, const std::string &display_dir, const std::string &name, const std::string &text)
{
	auto dir = fs::open_dir(real_dir);
	auto r = dir ? fs::write_file_atomic_at(dir->get(), name, fs::join(display_dir, name), text,
						{.mode = 0644, .fsync = false, .skip_if_unchanged = false})
		     : fail(dir.error());
	if (r)
		return;
	if (r.error().errnum == ENOENT)
		log::debug(r.error().message + ", no metrics written (no node_exporter textfile directory)");
	else
		log::warning(r.error().message + ", no metrics written");
}

}  // namespace unbounded
