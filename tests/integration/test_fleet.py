#!/usr/bin/env python3
"""Issue 15, the fleet view: the metrics files (promtool check metrics in every state, scraped by a real
prometheus-node-exporter), the node-problem-detector plugin protocol of `verify --npd`, and the shipped
monitor config and alert rules."""

import json
import os
import shutil
import socket
import subprocess
import time
import unittest
import urllib.request

from unbounded_tests import npd
from unbounded_tests.harness import SETUP, V1, V2, MachineRoot, main, make_chardev, plugin_spec, PLUGIN_SPEC, write

FLEET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fleet")
LICENSE_BIN = os.environ.get("LICENSE_BIN", "")
METRICS = "/var/lib/prometheus/node-exporter"


def tool(name, package):
    path = shutil.which(name)
    if not path:
        raise AssertionError(f"{name} is required (Debian package {package}; make check installs it)")
    return path


class FleetCase(unittest.TestCase):
    def machine(self, version=V1, metrics=True):
        m = MachineRoot(self).standard(version)
        m.config("refresh:\n  settle_time: 0s\n")
        if metrics:
            os.makedirs(m.p(METRICS), exist_ok=True)
        return m

    def metrics(self, m, name="unbounded-nvidia-setup.prom"):
        path = m.p(f"{METRICS}/{name}")
        promtool = tool("promtool", "prometheus")
        with open(path) as f:
            r = subprocess.run([promtool, "check", "metrics"], stdin=f, capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""), f"promtool check metrics {name}")
        values = {}
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
        return values


class TestMetrics(FleetCase):
    def test_ready(self):
        m = self.machine()
        self.assertEqual(m.setup().returncode, 0)
        v = self.metrics(m)
        self.assertEqual(v["unbounded_nvidia_ready"], 1)
        self.assertEqual(v['unbounded_nvidia_outcome_info{command="setup",outcome="ready"}'], 1)
        self.assertEqual(v[f'unbounded_nvidia_driver_info{{driver_version="{V1}",kernel_module_version="{V1}",'
                           f'staged_driver_version="{V1}"}}'], 1)
        self.assertEqual(v["unbounded_nvidia_pending_host_reboot"], 0)
        self.assertGreater(v["unbounded_nvidia_last_run_copied_bytes"], 0)
        self.assertEqual(v["unbounded_nvidia_gpus"], 1)
        self.assertAlmostEqual(v["unbounded_nvidia_last_run_timestamp_seconds"], time.time(), delta=60)
        self.assertEqual(v["unbounded_nvidia_refresh_interval_seconds"], 300)  # NvidiaSetupMetricsStale's measure

    def test_failed(self):
        m = self.machine()
        os.unlink(m.p(f"/run/host-nvidia/0/libnvidia-ml.so.{V1}"))
        self.assertEqual(m.setup().returncode, 1)
        v = self.metrics(m)
        self.assertEqual(v["unbounded_nvidia_ready"], 0)
        self.assertEqual(v['unbounded_nvidia_outcome_info{command="setup",outcome="failed"}'], 1)

    def test_no_gpu(self):
        m = MachineRoot(self)
        os.makedirs(m.p(METRICS))
        self.assertEqual(m.setup().returncode, 0)
        v = self.metrics(m)
        self.assertEqual(v["unbounded_nvidia_ready"], 1)
        self.assertEqual(v['unbounded_nvidia_outcome_info{command="setup",outcome="no-gpu"}'], 1)
        self.assertNotIn("unbounded_nvidia_refresh_interval_seconds", v)  # no timer on a CPU node: no stale alert

    def test_pending_host_reboot(self):
        m = self.machine()
        self.assertEqual(m.setup().returncode, 0)
        m.clear_staging()
        m.stage_all(V2)
        self.assertEqual(m.run("refresh").returncode, 0)
        v = self.metrics(m)
        self.assertEqual(v["unbounded_nvidia_ready"], 1)
        self.assertEqual(v["unbounded_nvidia_pending_host_reboot"], 1)
        self.assertEqual(v[f'unbounded_nvidia_driver_info{{driver_version="{V1}",kernel_module_version="{V1}",'
                           f'staged_driver_version="{V2}"}}'], 1)

    def test_no_textfile_directory_is_no_failure(self):
        m = self.machine(metrics=False)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("metrics", r.stderr)

    def test_an_unwritable_directory_is_a_warning_not_a_failure(self):
        m = self.machine(metrics=False)
        os.makedirs(m.p("/var/lib/prometheus"))
        write(m.p(METRICS), "a file where the directory should be")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no metrics written", r.stderr)

    def test_license_metrics(self):
        m = self.machine()
        for name, text in (("gridd.conf", "FeatureType=1\n"), ("client_configuration_token.tok", "secret-token")):
            write(m.p(f"/run/host-nvidia-licensing/{name}"), text)
        for _ in range(2):
            r = subprocess.run([LICENSE_BIN, "--root", m.path, "--boot"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        v = self.metrics(m, "unbounded-nvidia-license.prom")
        # two boots with no reload run in between to verify the files: installed (for the start) twice
        self.assertEqual(v['unbounded_nvidia_license_reloads_total{outcome="installed"}'], 2)
        self.assertEqual(v['unbounded_nvidia_license_reloads_total{outcome="applied"}'], 0)
        self.assertEqual(v["unbounded_nvidia_license_last_applied_timestamp_seconds"], 0)
        self.assertEqual(v['unbounded_nvidia_license_reloads_total{outcome="rolled-back"}'], 0)
        self.assertEqual(v["unbounded_nvidia_license_reload_interval_seconds"], 30)
        self.assertNotIn("secret-token", open(m.p(f"{METRICS}/unbounded-nvidia-license.prom")).read())


class TestNodeExporter(FleetCase):
    def test_a_real_node_exporter_serves_our_metrics(self):
        exporter = tool("prometheus-node-exporter", "prometheus-node-exporter")
        m = self.machine()
        self.assertEqual(m.setup().returncode, 0)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        p = subprocess.Popen([exporter, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                              "--collector.textfile", f"--collector.textfile.directory={m.p(METRICS)}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.terminate)
        body = ""
        for _ in range(100):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        self.assertIn("unbounded_nvidia_ready 1", body)
        self.assertIn('unbounded_nvidia_outcome_info{command="setup",outcome="ready"} 1', body)
        self.assertIn('node_textfile_scrape_error 0', body)


class TestNodeProblemDetector(FleetCase):
    def npd(self, m, condition="ready"):
        r = m.run("verify", f"--npd={condition}")
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 1, r.stdout)
        self.assertLessEqual(len(lines[0]), 80)
        return r.returncode, lines[0]

    def test_each_outcome(self):
        m = self.machine()
        self.assertEqual(m.setup().returncode, 0)
        self.assertEqual(self.npd(m), (0, f"ready: driver {V1}"))
        self.assertEqual(self.npd(m, "pending-host-reboot"), (0, f"ready: driver {V1}"))
        # pending host reboot: ready, and the second condition's problem
        m.clear_staging()
        m.stage_all(V2)
        rc, line = self.npd(m)
        self.assertEqual((rc, line), (0, f"pending-host-reboot: host staged {V2}, live {V1}"))
        self.assertEqual(self.npd(m, "pending-host-reboot")[0], 1)
        # not ready: the stale device plugin spec, with its cure cut to 80 characters
        m.clear_staging()
        m.stage_all(V1)
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V2))
        rc, line = self.npd(m)
        self.assertEqual(rc, 1)
        self.assertTrue(line.startswith("not-ready: The NVIDIA device plugin's CDI spec"), line)
        # staging gone
        os.unlink(m.p(PLUGIN_SPEC))
        m.clear_staging()
        rc, line = self.npd(m)
        self.assertEqual(rc, 1)
        self.assertTrue(line.startswith("staging-gone: "), line)
        # each outcome can be its own rule (its own reason): the problem is that outcome
        self.assertEqual(self.npd(m, "staging-gone")[0], 1)
        self.assertEqual(self.npd(m, "not-ready")[0], 0)
        self.assertEqual(self.npd(m, "pending-host-reboot")[0], 0)

    def test_gpus_missing(self):
        """Issue 24 item 3: expected_gpus 8 on a machine that sees 7 serves the 7 (setup exit 0), and verify,
        the node condition and the metrics say what is short."""
        m = MachineRoot(self).standard(V1, gpus=8)
        os.makedirs(m.p(METRICS), exist_ok=True)
        os.unlink(m.p("/dev/nvidia5"))
        m.config("expected_gpus: 8\n")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["gpus"], 7)
        self.assertTrue(any("expected_gpus is 8 but the machine offers 7 GPU(s)" in w and "0000:1d:00.0" in w
                            for w in r.result["warnings"]), r.result["warnings"])
        v = self.metrics(m)
        self.assertEqual(v["unbounded_nvidia_ready"], 1)
        self.assertEqual((v["unbounded_nvidia_expected_gpus"], v["unbounded_nvidia_gpus_missing"]), (8, 1))
        self.assertEqual(v["unbounded_nvidia_warnings"], len(r.result["warnings"]))
        rc, line = self.npd(m, "gpus-missing")
        self.assertEqual(rc, 1)
        self.assertTrue(line.startswith("gpus-missing: expected_gpus is 8 but the machine offers 7"), line)
        self.assertEqual(self.npd(m)[0], 1)
        self.assertEqual(self.npd(m, "staging-gone")[0], 0)
        j = json.loads(m.run("--json", "verify").stdout)
        self.assertEqual((j["ready"], j["outcome"]), (False, "gpus-missing"))
        self.assertIn("0000:1d:00.0", j["problems"][0]["message"])
        # the GPU comes back (a host reboot): ready again, nothing missing
        make_chardev(m.p("/dev/nvidia5"), 195, 5)
        self.assertEqual(m.setup().returncode, 0)
        self.assertEqual(self.npd(m, "gpus-missing")[0], 0)
        self.assertEqual(self.metrics(m)["unbounded_nvidia_gpus_missing"], 0)

    def test_usage_errors_are_unknown(self):
        m = self.machine()
        r = m.run("verify", "--npd=sometimes")
        self.assertEqual(r.returncode, 2)
        m.config("stagin: /x\n")
        r = m.run("verify", "--npd")
        self.assertEqual(r.returncode, 2)
        # the protocol wants one line in every case, a config error included
        self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)
        self.assertTrue(r.stdout.startswith("unknown: "), r.stdout)
        self.assertIn("nvidia.yaml:1: unknown ke", r.stdout)

    def test_a_hostile_host_path_is_escaped_in_the_line(self):
        """Issue 26, item 9: a hostPath with a newline and an escape sequence reached the NPD line raw (a second
        line, or a terminal escape in `kubectl describe node`); it is escaped as on stderr and in --json."""
        m = self.machine()
        self.assertEqual(m.setup().returncode, 0)
        write(m.p("/etc/cdi/nvidia.yaml"), '---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: "0"\n'
              '    containerEdits:\n      mounts:\n        - hostPath: "/x\\n\\e[2Jok"\n          containerPath: /x\n')
        rc, line = self.npd(m)
        self.assertEqual(rc, 1)
        self.assertNotIn("\x1b", line)
        self.assertIn(r"hostPath /x\x0a\x1b[2Jok does not exist", line)

    def test_the_shipped_monitor_config_runs_verify_with_the_protocol(self):
        config = json.load(open(os.path.join(FLEET, "unbounded-nvidia-monitor.json")))
        self.assertEqual(config["plugin"], "custom")
        self.assertEqual(config["pluginConfig"]["max_output_length"], 80)
        conditions = {c["type"] for c in config["conditions"]}
        self.assertEqual(conditions, {"NvidiaDriverNotReady", "NvidiaHostRebootPending", "NvidiaLicenseNotAcquired",
                                      "NvidiaLicenseRebootRequired"})
        # Issue 43, item 8: one rule per condition (see test_no_condition_flaps_under_either_npd).
        per_condition = [r["condition"] for r in config["rules"]]
        self.assertEqual(len(set(per_condition)), len(per_condition), "a condition set by two rules flaps")
        binaries = {"/usr/bin/unbounded-nvidia-setup": SETUP, "/usr/libexec/unbounded-nvidia/unbounded-nvidia-license-reload": LICENSE_BIN}
        for rule in config["rules"]:
            self.assertIn(rule["condition"], conditions)
            self.assertIn(rule["path"], binaries)
            if rule["path"] == "/usr/bin/unbounded-nvidia-setup":
                self.assertEqual(rule["args"][0], "verify")
            # the arguments are ones the binary accepts
            m = self.machine()
            self.assertIn(m.run(*rule["args"], binary=binaries[rule["path"]]).returncode, (0, 1))


class TestMonitorReplay(unittest.TestCase):
    """Issue 43, item 8: the shipped monitor's rules replayed as node-problem-detector's custom plugin
    monitor applies them (pkg/custompluginmonitor/custom_plugin_monitor.go). Older releases take the
    plugin's results one at a time from a channel and set a permanent rule's condition from each
    (status True on exit 1, False on exit 0; reason and message the rule's); newer ones gather an
    interval's results and set a condition True when any of its rules says so. The real binary answers
    each rule's arguments on a machine in every outcome, for several intervals: the condition must be
    the same under both, and never change from one interval to the next while the machine does not."""

    STATES = ("ready", "not-ready", "staging-gone", "gpus-missing", "pending-host-reboot", "staging-inconsistent")

    def machine_in(self, state):
        m = MachineRoot(self).standard(V1, gpus=2)
        config = "expected_gpus: 2\n"
        m.config(config)
        self.assertEqual(m.setup().returncode, 0)
        if state == "not-ready":
            os.unlink(os.path.join(m.libdir(), f"libnvidia-ml.so.{V1}"))
        elif state == "staging-gone":
            m.clear_staging()
            os.makedirs(m.p("/run/host-nvidia"), exist_ok=True)
            os.unlink(m.p("/dev/nvidiactl"))
        elif state == "gpus-missing":
            os.unlink(m.p("/dev/nvidia1"))
        elif state == "pending-host-reboot":
            m.clear_staging()
            m.stage_all(V2)
        elif state == "staging-inconsistent":
            d = m.p("/run/host-nvidia/0")
            os.rename(os.path.join(d, f"libnvidia-ml.so.{V1}"), os.path.join(d, f"libnvidia-ml.so.{V2}"))
        return m

    def test_no_condition_flaps_under_either_npd(self):
        config = json.load(open(os.path.join(FLEET, "unbounded-nvidia-monitor.json")))
        rules = [r for r in config["rules"] if r["path"] == "/usr/bin/unbounded-nvidia-setup"]
        expect = {"ready": (False, False), "not-ready": (True, False), "staging-gone": (True, False),
                  "gpus-missing": (True, False), "pending-host-reboot": (False, True), "staging-inconsistent": (False, True)}
        for state in self.STATES:
            m = self.machine_in(state)
            results = []
            for rule in rules:
                r = m.run(*rule["args"])
                self.assertIn(r.returncode, (0, 1), f"{state}: {rule['args']}: {r.stdout}{r.stderr}")
                results.append(r.returncode)
            # three intervals of an unchanging machine; older NPD's order varies
            history_old, last_new = npd.conditions_over_intervals(rules, results)
            self.assertEqual(len({json.dumps(h, sort_keys=True) for h in history_old}), 1, f"{state}: flaps: {history_old}")
            self.assertEqual(history_old[-1], last_new, state)
            got = (last_new["NvidiaDriverNotReady"], last_new["NvidiaHostRebootPending"])
            self.assertEqual(got, expect[state], state)

    def test_the_replay_catches_a_monitor_that_flaps(self):
        """The check itself: two permanent rules on one condition (the monitor before self-repair) flap
        under the older processing when one finds the problem and the other does not."""
        rules = [{"condition": "C", "reason": "A"}, {"condition": "C", "reason": "B"}]
        cond = {}
        states = {npd.one_at_a_time(rules, [1, 0], cond)["C"], npd.one_at_a_time(rules, [0, 1], cond)["C"]}
        self.assertEqual(states, {True, False})


class TestLicenseCondition(unittest.TestCase):
    """Issue 28: node-problem-detector's NvidiaLicenseNotAcquired, from what the reloader last recorded:
    true once nvidia-gridd has run unlicensed or pending longer than licensing.not_acquired_after."""

    def npd(self, m):
        r = subprocess.run([LICENSE_BIN, "--root", m.path, "--npd"], capture_output=True, text=True)
        self.assertEqual(r.stdout.count("\n"), 1, r.stdout)
        self.assertLessEqual(len(r.stdout.strip()), 80)
        return r.returncode, r.stdout.strip()

    def state(self, m, state, age_s):
        d = m.p("/var/lib/unbounded-nvidia/license")
        os.makedirs(d, mode=0o700, exist_ok=True)
        write(os.path.join(d, "metrics.state"), f"license {state}\nlicense_since {int(time.time()) - age_s}\n")

    def test_the_condition_follows_the_recorded_state_and_its_age(self):
        m = MachineRoot(self)
        # Not "unknown" (exit 2 everywhere else): licensing is not used, the condition does not apply.
        self.assertEqual(self.npd(m), (0, "licensing not used here (no license state): the condition does not apply"))
        self.state(m, "licensed", 3600)
        self.assertEqual(self.npd(m), (0, "licensed for 60m"))
        self.state(m, "pending", 120)
        self.assertEqual(self.npd(m), (0, "pending for 2m (condition after 10m)"))
        self.state(m, "unlicensed", 700)
        self.assertEqual(self.npd(m), (1, "unlicensed for 11m (condition after 10m)"))
        m.config("licensing:\n  not_acquired_after: 20m\n")
        self.assertEqual(self.npd(m)[0], 0)
        self.state(m, "pending", 1300)
        self.assertEqual(self.npd(m), (1, "pending for 21m (condition after 20m)"))

    def test_a_state_anyone_could_have_written_is_not_believed(self):
        m = MachineRoot(self)
        self.state(m, "licensed", 60)
        os.chmod(m.p("/var/lib/unbounded-nvidia/license"), 0o777)
        rc, line = self.npd(m)
        self.assertEqual(rc, 2)
        self.assertTrue(line.startswith("unknown: "), line)


    def test_a_configuration_error_still_answers_one_line(self):
        """Issue 34, item 10: node-problem-detector shows the line; an empty one says nothing."""
        m = MachineRoot(self)
        self.state(m, "licensed", 60)
        m.config("licensing:\n  not_a_key: 1\n")
        rc, line = self.npd(m)
        self.assertEqual(rc, 2)
        self.assertTrue(line.startswith("unknown: "), line)
        self.assertIn("nvidia.yaml:2", line)

    def test_a_usage_error_still_answers_one_line(self):
        m = MachineRoot(self)
        for args in (["--npd", "--bogus"], ["--bogus", "--npd"], ["--npd", "extra"]):
            r = subprocess.run([LICENSE_BIN, "--root", m.path, *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(r.stdout.count("\n"), 1, r.stdout)
            self.assertTrue(r.stdout.startswith("unknown: "), r.stdout)
            self.assertLessEqual(len(r.stdout.strip()), 80)

    def test_a_feature_type_held_back_is_its_own_condition_until_the_host_reboots(self):
        """NvidiaLicenseRebootRequired (--npd=reboot): true while the reloader's last run on this boot of
        the host kept a rotation's FeatureType back (another one is licensed); false after the reboot."""
        m = MachineRoot(self)
        r = subprocess.run([LICENSE_BIN, "--root", m.path, "--npd=reboot"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, "licensing not used here (no license state): the condition does not apply\n"))
        write(m.p("/proc/stat"), "cpu  1 2 3\nbtime 1796140000\n")
        write(m.p("/proc/uptime"), "5000.00 9000.00\n")
        d = m.p("/var/lib/unbounded-nvidia/license")
        os.makedirs(d, mode=0o700, exist_ok=True)
        write(os.path.join(d, "metrics.state"),
              "license licensed\nhost_btime 1796140000\nhost_uptime 4000\nlicensed_feature 2\nheld_feature 4\n")
        r = subprocess.run([LICENSE_BIN, "--root", m.path, "--npd=reboot"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (1, "FeatureType=4 waits for a host reboot (licensed: FeatureType=2)\n"))
        self.assertEqual(self.npd(m)[0], 0)  # the license itself is held
        write(m.p("/proc/stat"), "cpu  1 2 3\nbtime 1796150000\n")  # the host rebooted
        write(m.p("/proc/uptime"), "60.00 100.00\n")
        r = subprocess.run([LICENSE_BIN, "--root", m.path, "--npd=reboot"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, "no licensing change waits for a host reboot\n"))
        r = subprocess.run([LICENSE_BIN, "--root", m.path, "--npd=bogus"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stdout.startswith("unknown: --npd takes"), r.stdout)

    def test_boot_and_npd_together_are_a_usage_error(self):
        """Issue 46: --boot --npd once answered the condition and ignored --boot. Either order, one
        clear line on stderr, and node-problem-detector's one line on stdout."""
        m = MachineRoot(self)
        self.state(m, "licensed", 60)
        for args in (["--boot", "--npd"], ["--npd", "--boot"]):
            r = subprocess.run([LICENSE_BIN, "--root", m.path, *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertEqual(r.stderr, "unbounded-nvidia-license-reload: --boot and --npd cannot be combined (see --help)\n")
            self.assertEqual(r.stdout, "unknown: --boot and --npd cannot be combined (see --help)\n")

    def test_a_condition_that_fires_at_once_is_a_configuration_error(self):
        """Issue 34: not_acquired_after 0 would raise the condition at every pending moment."""
        m = MachineRoot(self)
        self.state(m, "pending", 1)
        for zero in ("0", "0s", "0m", "500ms"):
            m.config(f"licensing:\n  not_acquired_after: {zero}\n")
            rc, line = self.npd(m)
            self.assertEqual(rc, 2, line)
            self.assertTrue(line.startswith("unknown: "), line)
            self.assertIn("nvidia.yaml:2", line)
            # the whole message (the journal, stderr) names the file, the line and the key
            r = m.run(binary=LICENSE_BIN)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("/etc/unbounded/nvidia.yaml:2: ", r.stderr)
            self.assertIn("'licensing.not_acquired_after'", r.stderr)
        m.config("licensing:\n  not_acquired_after: 1s\n")
        self.assertEqual(self.npd(m)[0], 1)  # a second is allowed, and it has passed
        m.config("licensing:\n  not_acquired_after: 1m\n")
        self.assertEqual(self.npd(m), (0, "pending for 0m (condition after 1m)"))

    def test_a_license_past_its_expiry_is_not_licensed(self):
        """Issue 34, item 9: the recorded expiry is compared with the clock (a minute's margin)."""
        m = MachineRoot(self)
        d = m.p("/var/lib/unbounded-nvidia/license")
        os.makedirs(d, mode=0o700, exist_ok=True)
        now = int(time.time())
        write(os.path.join(d, "metrics.state"), f"license licensed\nlicense_since {now - 7200}\nlicense_expiry {now - 700}\n")
        self.assertEqual(self.npd(m), (1, "unlicensed (expired) for 11m (condition after 10m)"))
        write(os.path.join(d, "metrics.state"), f"license licensed\nlicense_since {now - 7200}\nlicense_expiry {now - 200}\n")
        self.assertEqual(self.npd(m), (0, "unlicensed (expired) for 3m (condition after 10m)"))
        write(os.path.join(d, "metrics.state"), f"license licensed\nlicense_since {now - 7200}\nlicense_expiry {now - 30}\n")
        self.assertEqual(self.npd(m), (0, "licensed for 120m"), "within the margin")
        write(os.path.join(d, "metrics.state"), f"license licensed\nlicense_since {now - 7200}\nlicense_expiry {now + 3600}\n")
        self.assertEqual(self.npd(m), (0, "licensed for 120m"))


class TestAlertRules(unittest.TestCase):
    def test_promtool_accepts_the_rules(self):
        promtool = tool("promtool", "prometheus")
        r = subprocess.run([promtool, "check", "rules", os.path.join(FLEET, "unbounded-nvidia.rules.yml")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS: 10 rules found", r.stdout)

    def test_the_alerts_fire_on_what_makes_pods_fail(self):
        """Issue 43, item 7: CDI off or a shadowed spec alerts (a second spec that shadows nothing does
        not); a failed setup alerts. promtool's unit tests over the rules file."""
        promtool = tool("promtool", "prometheus")
        r = subprocess.run([promtool, "test", "rules", os.path.join(FLEET, "unbounded-nvidia.rules.test.yml")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout)


if __name__ == "__main__":
    main()
