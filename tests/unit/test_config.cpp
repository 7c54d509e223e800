#include "config.hpp"

#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <functional>

using namespace unbounded;
using namespace std::chrono_literals;

TEST_CASE("durations parse like systemd time spans", "[config]")
{
	CHECK(parse_duration("30s").value() == 30s);
	CHECK(parse_duration("500ms").value() == 500ms);
	CHECK(parse_duration("2m").value() == 120s);
	CHECK(parse_duration("1m30s").value() == 90s);
	CHECK(parse_duration("1h").value() == 3600s);
	// the sum is bounded like each term, so no timeout derived from it overflows
	// what PID 1 accepts (20,000 terms gave TimeoutStartSec=65970697666920s)
	CHECK(parse_duration("1099511627776ms").value().count() == 1099511627776LL);
	CHECK_FALSE(parse_duration("1099511627776ms1ms"));
	std::string many;
	for (int i = 0; i < 20000; i++)
		many += "300000h";
	CHECK_FALSE(parse_duration(many));
	CHECK(parse_duration("45").value() == 45s);
	CHECK(parse_duration("0").value() == 0ms);
	for (const char *bad : {"", "s", "soon", "-5s", "5 parsecs", "1.5s", "10x", "3s5"})
		CHECK_FALSE(parse_duration(bad).has_value());
	CHECK(format_duration(30s) == "30s");
	CHECK(format_duration(300ms) == "300ms");
}

TEST_CASE("an empty or absent config gives the documented defaults", "[config]")
{
	auto c = parse_config("", "/etc/unbounded/nvidia.yaml");
	REQUIRE(c);
	CHECK(c->staging == "/run/host-nvidia");
	CHECK(c->driver_root == "/run/nvidia/driver");
	CHECK(c->cdi_spec == "/etc/cdi/nvidia.yaml");
	CHECK(c->device_plugin_spec == "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json");
	CHECK(c->staging_timeout == 30s);
	CHECK(c->enabled == Enabled::Auto);
	CHECK_FALSE(c->licensing.section_present);
	CHECK(c->licensing.jitter == 60s);
	CHECK(c->licensing.reload_interval == 30s);
	CHECK(c->refresh.settle_time == 10s);
	CHECK(c->refresh.settle_limit == 5min);
	CHECK(c->refresh.interval == 5min);

	auto missing = load_config("/nonexistent/unbounded.yaml", false);
	REQUIRE(missing);
	CHECK(missing->driver_root == "/run/nvidia/driver");
	auto required = load_config("/nonexistent/unbounded.yaml", true);
	REQUIRE_FALSE(required);
	CHECK(required.error().exit_code == EXIT_USAGE);
	CHECK_THAT(required.error().message, Catch::Contains("/nonexistent/unbounded.yaml"));
}

TEST_CASE("every key is read", "[config]")
{
	auto c = parse_config(R"(enabled: true
staging: /srv/staging/
driver_root: /run/gpu/driver
cdi_spec: /etc/cdi/gpu.yaml
device_plugin_spec: /run/cdi/dp.json
cdi_hook: /usr/local/bin/nvidia-cdi-hook
staging_timeout: 1m
licensing:
  source_dir: /run/lic
  legacy_files:
    gridd_conf: /old/gridd.conf
    client_token: /old/token.tok
  jitter: 0s
  auto_reload: false
  reload_interval: 45s
  settle_time: 2s
  stop_timeout: 20s
  gridd_unit: gridd.service
refresh:
  settle_time: 0s
  settle_limit: 2m
  interval: 1h
)",
			      "f.yaml");
	REQUIRE(c);
	CHECK(c->enabled == Enabled::Yes);
	CHECK(c->staging == "/srv/staging");
	CHECK(c->driver_root == "/run/gpu/driver");
	CHECK(c->cdi_hook == "/usr/local/bin/nvidia-cdi-hook");
	CHECK(c->staging_timeout == 60s);
	CHECK(c->licensing.section_present);
	CHECK(c->licensing.source_dir == "/run/lic");
	CHECK(c->licensing.legacy_gridd_conf == "/old/gridd.conf");
	CHECK(c->licensing.legacy_client_token == "/old/token.tok");
	CHECK(c->licensing.jitter == 0s);
	CHECK_FALSE(c->licensing.auto_reload);
	CHECK(c->licensing.reload_interval == 45s);
	CHECK(c->licensing.gridd_unit == "gridd.service");
	CHECK(c->refresh.settle_time == 0s);
	CHECK(c->refresh.settle_limit == 2min);
	CHECK(c->refresh.interval == 1h);
}

TEST_CASE("bad configs name the file, the line and the key", "[config]")
{
	struct Case {
		const char *yaml;
		const char *expect;
	};
	const Case cases[] = {
		{"staging: /a\nstagin: /b\n", "f.yaml:2: unknown key 'stagin'"},
		{"licensing:\n  jitter: 5s\n  jiter: 5s\n", "f.yaml:3: unknown key 'licensing.jiter'"},
		{"staging_timeout: forever\n", "f.yaml:1: invalid duration 'forever' for key 'staging_timeout'"},
		{"driver_root: relative/path\n", "f.yaml:1: expected an absolute path without '.' or '..' components or control characters for key 'driver_root'"},
		{"enabled: maybe\n", "f.yaml:1: expected auto, true or false for key 'enabled'"},
		{"refresh:\n  settle: 5s\n", "f.yaml:2: unknown key 'refresh.settle'"},
		{"refresh:\n  interval: 1s\n", "f.yaml:2: duration '1s' is below the minimum of 10s for key 'refresh.interval'"},
		{"licensing:\n  auto_reload: perhaps\n", "f.yaml:2: expected true or false for key 'licensing.auto_reload'"},
		{"consumers:\n  selectors: app=x\n", "f.yaml:2: expected a list of label selectors (key=value[,key=value]) for key 'consumers.selectors'"},
		{"consumers:\n  selectors:\n    - app\n", "f.yaml:3: invalid label selector 'app'"},
		{"consumers:\n  selectors:\n    - \"app=a b\"\n", "f.yaml:3: invalid label selector 'app=a b'"},
		{"consumers:\n  selectors:\n    - app=a,app=b\n", "f.yaml:3: invalid label selector 'app=a,app=b'"},
		{"consumers:\n  wait: 0s\n", "f.yaml:2: duration '0s' is below the minimum of 1s for key 'consumers.wait'"},
		{"consumers:\n  namespaces:\n    - Kube-System\n", "f.yaml:3: invalid namespace 'Kube-System'"},
		{"consumers:\n  runtime_endpoint: run/crio.sock\n", "f.yaml:2: expected an absolute path"},
		{"staging: [a, b]\n", "f.yaml:1: expected a string value for key 'staging'"},
		{"- a\n- b\n", "f.yaml:1: expected a mapping at '(top level)'"},
		{"staging: /a\n  bad: indent: here\n", "f.yaml:2:"},
		{"driver_root: [unclosed\n", "f.yaml:"},
		{"staging:\n", "f.yaml:1: missing value for key 'staging'"},
		{"driver_root: /run\n", "f.yaml:1: must not be / or a top-level directory: 'driver_root'"},
		// Normal form: "/./etc" is the top-level /etc, not a deeper path.
		{"driver_root: /./etc\n", "f.yaml:1: expected an absolute path without '.' or '..' components"},
		{"driver_root: /run/nvidia/../../etc\n", "f.yaml:1: expected an absolute path without"},
		{"cdi_spec: \"/etc/cdi/a\\nb.yaml\"\n", "f.yaml:1: expected an absolute path without '.' or '..' components or control characters for key 'cdi_spec'"},
		{"licensing:\n  source_dir: \"/run/lic\\nUnit=other.service\"\n", "f.yaml:2: expected an absolute path without '.' or '..' components or control characters for key 'licensing.source_dir'"},
		{"staging: /a\nstaging: /b\n", "f.yaml:2: duplicate key 'staging'"},
		{"licensing:\n  jitter: 1s\n  jitter: 2s\n", "f.yaml:3: duplicate key 'licensing.jitter'"},
		{"driver_root: /run/nvidia/driver\nstaging: /run/nvidia/driver/staging\n", "f.yaml:2: driver_root and staging overlap"},
		{"driver_root: /usr/lib/nvidia\n", "f.yaml:1: must not lie in /usr: 'driver_root'"},
		// Intervals below a second.
		{"licensing:\n  reload_interval: 0\n", "f.yaml:2: duration '0' is below the minimum of 1s for key 'licensing.reload_interval'"},
		{"licensing:\n  reload_interval: 10ms\n", "f.yaml:2: duration '10ms' is below the minimum of 1s for key 'licensing.reload_interval'"},
		{"? [a, b]\n: c\n", "f.yaml:1: expected a plain key"},
		{"licensing:\n  ? {x: 1}\n  : c\n", "f.yaml:2:"},
		{"staging: &a /x\ndriver_root: *a\n", "f.yaml:2: YAML aliases are not allowed here under 'driver_root'"},
		{"licensing: [[[[[[[[[[[[1]]]]]]]]]]]]\n", "f.yaml:1: nested deeper than 8 levels under 'licensing"},
		{"licensing:\n  gridd_unit: gridd\n", "expected a service unit name for key 'licensing.gridd_unit'"},
		// Written into two drop-ins' text: a newline would add the attacker's own line (any directive).
		{"licensing:\n  gridd_unit: \"nvidia-gridd.service\\nRequires=evil.service\"\n", "expected a service unit name for key 'licensing.gridd_unit'"},
		{"licensing:\n  gridd_unit: \"nvidia gridd.service\"\n", "expected a service unit name for key 'licensing.gridd_unit'"},
		{"licensing:\n  gridd_unit: \"@.service\"\n", "expected a service unit name for key 'licensing.gridd_unit'"},
		{"licensing:\n  gridd_unit: \"a@b@c.service\"\n", "expected a service unit name for key 'licensing.gridd_unit'"},
	};
	for (const auto &c : cases) {
		INFO(test::one_line(c.yaml));
		auto r = parse_config(c.yaml, "f.yaml");
		REQUIRE_FALSE(r);
		CHECK(r.error().exit_code == EXIT_USAGE);
		CHECK_THAT(r.error().message, Catch::Contains(c.expect));
		CHECK(r.error().message.find('\n') == std::string::npos);
	}
}

TEST_CASE("every boolean of the config takes the same words", "[config]")
{
	// `enabled: on` was refused while every other boolean took it (exit 2, containerd held back).
	struct Key {
		const char *yaml;  // with %s for the word
		std::function<bool(const Config &)> value;
	};
	const Key keys[] = {
		{"enabled: %s\n", [](const Config &c) { return c.enabled == Enabled::Yes; }},
		{"ipc_sockets: %s\n", [](const Config &c) { return c.ipc_sockets; }},
		{"nvoptix: %s\n", [](const Config &c) { return c.nvoptix; }},
		{"licensing:\n  auto_reload: %s\n", [](const Config &c) { return c.licensing.auto_reload; }},
	};
	for (const auto &k : keys)
		for (const auto &[word, expected] : std::vector<std::pair<std::string, bool>>{
			     {"true", true}, {"yes", true}, {"on", true}, {"false", false}, {"no", false}, {"off", false}}) {
			std::string text = k.yaml;
			text.replace(text.find("%s"), 2, word);
			auto c = parse_config(text, "/etc/unbounded/nvidia.yaml");
			INFO(text);
			REQUIRE(c);
			CHECK(k.value(*c) == expected);
		}
}

TEST_CASE("consumer selectors take Kubernetes' label syntax", "[config]")
{
	auto s = parse_consumer_selector("app.kubernetes.io/name=nvidia-device-plugin,app.kubernetes.io/instance=nvdp");
	REQUIRE(s);
	CHECK(s->labels.size() == 2);
	CHECK(s->labels.at("app.kubernetes.io/name") == "nvidia-device-plugin");
	CHECK(parse_consumer_selector("tier=")->labels.at("tier").empty());  // an empty value is a value
	for (const char *bad : {"", "app", "=x", "app=-x", "app=x-", "Example.com/app=x", "/app=x", "app=x,", "a/b/c=x",
				"app=0123456789012345678901234567890123456789012345678901234567890123"})
		CHECK_FALSE(parse_consumer_selector(bad));
	const auto defaults = ConsumersConfig::default_consumer_selectors();
	CHECK(defaults.size() == 8);
	auto c = parse_config("consumers:\n  enabled: false\n  selectors:\n    - app=my-plugin\n  wait: 30s\n", "f.yaml");
	REQUIRE(c);
	CHECK_FALSE(c->consumers.enabled);
	REQUIRE(c->consumers.selectors.size() == 1);
	CHECK(c->consumers.selectors[0].text == "app=my-plugin");
	CHECK(c->consumers.wait == 30s);
	CHECK(c->consumers.in_namespace("kube-system"));
	CHECK_FALSE(c->consumers.in_namespace("team-a"));
	auto any = parse_config("consumers:\n  namespaces: []\n", "f.yaml");
	REQUIRE(any);
	CHECK(any->consumers.in_namespace("team-a"));
}
