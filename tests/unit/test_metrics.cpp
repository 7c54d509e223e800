// The Prometheus text writer and the license counters: what reaches a label, number formatting.
#include "license_metrics.hpp"
#include "metrics.hpp"

#include <catch2/catch.hpp>

using namespace unbounded;

TEST_CASE("metrics text: HELP and TYPE once per name, escaped labels, exact numbers", "[metrics]")
{
	MetricsText m;
	m.gauge("a_seconds", "A time", 1796050123.456);
	m.counter("b_total", "Runs", 3, {{"outcome", "x"}});
	m.counter("b_total", "Runs", 0, {{"outcome", "q\"uo\\te\nnl"}});
	CHECK(m.text() == "# HELP a_seconds A time\n# TYPE a_seconds gauge\na_seconds 1796050123.456\n"
			  "# HELP b_total Runs\n# TYPE b_total counter\nb_total{outcome=\"x\"} 3\n"
			  "b_total{outcome=\"q\\\"uo\\\\te\\nnl\"} 0\n");
}

TEST_CASE("license counters survive a round trip and never carry an unknown outcome into a label", "[metrics]")
{
	LicenseCounters c;
	c.runs["applied"] = 4;
	c.runs["rolled-back"] = 1;
	c.last_applied = 1796050000;
	auto back = LicenseCounters::parse(c.serialize());
	CHECK(back.runs == c.runs);
	CHECK(back.last_applied == c.last_applied);
	auto hostile = LicenseCounters::parse("runs evil\"} 1\nruns applied -3\nruns applied x\nlast_applied 12abc\nruns installed 2\n");
	CHECK(hostile.runs == std::map<std::string, double>{{"installed", 2}});
	CHECK(hostile.last_applied == 0);
	const std::string text = license_metrics_text(back, 1796050001);
	CHECK(text.find("unbounded_nvidia_license_reloads_total{outcome=\"applied\"} 4\n") != std::string::npos);
	CHECK(text.find("unbounded_nvidia_license_reloads_total{outcome=\"verified\"} 0\n") != std::string::npos);
}
