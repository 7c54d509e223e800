#!/usr/bin/env python3
"""unbounded-nvidia-consumers: after a change of what our specs offer (the driver, the GPUs), the GPU
consumers that read the root once (the device plugin, the DRA plugin, GFD, dcgm-exporter) are restarted
through the runtime's CRI, once, and verify says whether they came back on the new root. Fake machine
roots under --root; the runtime is tests' own CRI server on the root's containerd socket
(fake_cri.py), the service manager the tests' PID 1 on the root's private socket (fake_systemd.py)."""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

# meson points LD_LIBRARY_PATH at the fixtures, among which is a stand-in libssl.so.3 that
# python3-grpcio would load instead of OpenSSL's: this suite runs without it (nothing here needs it).
if os.environ.get("LD_LIBRARY_PATH"):
    os.execve(sys.executable, [sys.executable] + sys.argv, {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})

from unbounded_tests import cri
from unbounded_tests.fake_cri import FakeRuntime
from unbounded_tests.fake_systemd import FakeSystemd
from unbounded_tests.harness import PLUGIN_SPEC, V1, V2, MachineRoot, main, plugin_spec, write

BUILD = os.environ["BUILD_ROOT"]
CONSUMERS = os.environ["CONSUMERS_BIN"]
QUICK = "refresh:\n  settle_time: 0s\nconsumers:\n  wait: 5s\n"
PLUGIN = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}
UNIT = "unbounded-nvidia-consumers.service"
PB = None


def pb():
    global PB
    if PB is None:
        PB = cri.generate(BUILD)
    return PB


class ConsumersCase(unittest.TestCase):
    def machine(self, config=QUICK, runtime=True):
        """A machine whose boot setup built V1 (generation 1), a device plugin that wrote its spec for
        it and an unrelated pod running on the fake runtime, both started after that setup."""
        m = MachineRoot(self).standard(V1)
        m.config(config)
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"), exist_ok=True)
        self.units_file = m.path + "-units.json"
        with open(self.units_file, "w") as f:
            json.dump({"units": {UNIT: {"active_state": "inactive"}}, "calls": []}, f)
        self.addCleanup(lambda: os.path.exists(self.units_file) and os.unlink(self.units_file))
        self.addCleanup(FakeSystemd(m.path, self.units_file).start().stop)
        r = self.cmd(m, "setup")
        self.assertEqual(r.returncode, 0, r.stderr)
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        self.rt = None
        if runtime:
            # A socket path must fit sun_path (108 bytes): the root's own may not.
            sockdir = tempfile.mkdtemp(prefix="cri-")
            self.addCleanup(lambda: subprocess.run(["rm", "-rf", sockdir]))
            os.makedirs(m.p("/run/containerd"), exist_ok=True)
            sock = os.path.join(sockdir, "c.sock")
            self.rt = FakeRuntime(pb(), sock)
            self.addCleanup(self.rt.close)
            os.symlink(sock, m.p("/run/containerd/containerd.sock"))
            self.plugin = self.rt.pod("nvdp-nvidia-device-plugin-x7k2p", PLUGIN, containers=("nvidia-device-plugin-ctr",),
                                      on_start=lambda: write(m.p(PLUGIN_SPEC), plugin_spec(m, self.version_now(m))))
            self.other = self.rt.pod("web-5d8f7", {"app": "web"}, namespace="default")
        return m

    def version_now(self, m):
        with open(m.p("/run/unbounded-nvidia/driver-generation.json")) as f:
            return json.load(f)["driver_version"]

    def cmd(self, m, *args):
        r = m.run("--json", *args)
        r.result = json.loads(r.stdout) if r.stdout.strip() else None
        return r

    def consumers(self, m, timeout=60):
        return subprocess.run([CONSUMERS, "--root", m.path], capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, SYSTEMD_LOG_LEVEL="debug"))

    def starts(self):
        with open(self.units_file) as f:
            return [c for c in json.load(f)["calls"] if c == "start " + UNIT]

    def record(self, m):
        with open(m.p("/run/unbounded-nvidia/consumers.json")) as f:
            return json.load(f)

    def upgrade(self, m):
        """The host upgraded its driver and loaded the new module: the refresh swaps the root."""
        m.clear_staging()
        m.stage_all(V2)
        m.set_proc_version(V2)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r


class TestDriverChange(ConsumersCase):
    def test_the_device_plugin_is_restarted_once_and_verify_waits_for_it(self):
        m = self.machine()
        plugin_before = set(self.rt.running(self.plugin))
        other_before = set(self.rt.running(self.other))
        r = self.upgrade(m)
        self.assertEqual(r.result["driver_root_generation"], 2, r.result)
        self.assertEqual(len(self.starts()), 1, "the refresh did not start the consumers' helper")
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 1, v.stdout)
        self.assertIn("have not followed driver root generation 2", v.stdout)
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertEqual(self.rt.stops, sorted(plugin_before), "only the device plugin's container is stopped, once")
        self.assertEqual(set(self.rt.running(self.other)), other_before, "the unrelated pod was touched")
        self.assertTrue(set(self.rt.running(self.plugin)).isdisjoint(plugin_before))
        with open(m.p(PLUGIN_SPEC)) as f:
            self.assertIn(f"libcuda.so.{V2}", f.read(), "the restarted plugin's spec names the new driver")
        rec = self.record(m)
        self.assertTrue(rec["finished"], rec)
        self.assertEqual([(x["pod"], x["outcome"]) for x in rec["consumers"]], [("nvdp-nvidia-device-plugin-x7k2p", "restarted")])
        self.assertIn("Restarting the GPU consumer kube-system/nvdp-nvidia-device-plugin-x7k2p", c.stderr)
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        prom = open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-consumers.prom")).read()
        self.assertIn('unbounded_nvidia_consumer_restarts_total{consumer="nvidia-device-plugin-ctr",outcome="restarted"} 1', prom)
        # Refreshes that change nothing and helper runs after it restart nothing more.
        r = self.cmd(m, "refresh")
        self.assertEqual(r.result["driver_root_generation"], 2)
        self.assertEqual(len(self.starts()), 1)
        self.assertEqual(self.consumers(m).returncode, 0)
        self.assertEqual(len(self.rt.stops), 1)

    def test_a_tenant_pod_with_a_consumer_s_labels_is_not_touched(self):
        m = self.machine()
        tenant = self.rt.pod("my-nvdp-lookalike", PLUGIN, namespace="team-a", containers=("x",))
        self.upgrade(m)
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertEqual(len(self.rt.stops), 1)
        self.assertNotIn(list(self.rt.running(tenant))[0], self.rt.stops)
        self.assertEqual([x["pod"] for x in self.record(m)["consumers"]], ["nvdp-nvidia-device-plugin-x7k2p"])

    def test_a_change_of_the_gpus_is_followed_too(self):
        m = self.machine()
        m.add_gpu(1, "0000:02:00.0", "GPU-11111111-2222-3333-4444-555555555555")
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["driver_root_generation"], 2, r.result)
        self.assertEqual(len(self.starts()), 1)
        self.assertEqual(self.consumers(m).returncode, 0)
        self.assertEqual(len(self.rt.stops), 1)

    def test_a_refresh_that_changes_nothing_restarts_nothing(self):
        m = self.machine()
        r = self.cmd(m, "refresh")
        self.assertEqual(r.result["driver_root_generation"], 1, r.result)
        self.assertEqual(self.starts(), [])
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertEqual(self.rt.stops, [])
        self.assertFalse(os.path.exists(m.p("/run/unbounded-nvidia/consumers.json")))


class TestLimits(ConsumersCase):
    def test_the_off_switch_restarts_nothing_and_verify_names_the_stale_plugin(self):
        m = self.machine(config=QUICK.replace("consumers:\n", "consumers:\n  enabled: false\n"))
        self.upgrade(m)
        self.assertEqual(self.starts(), [])
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("consumers.enabled is off", c.stderr)
        self.assertEqual(self.rt.stops, [])
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 1, v.stdout)
        self.assertIn("device plugin", v.stdout)
        self.assertIn(PLUGIN_SPEC, v.stdout)

    def test_a_consumer_that_never_comes_back_is_one_problem_and_no_second_restart(self):
        m = self.machine(config=QUICK.replace("wait: 5s", "wait: 2s"))
        gone = self.rt.pod("dcgm-exporter-abcde", {"app.kubernetes.io/name": "dcgm-exporter"}, containers=("exporter",),
                           created_at=time.time_ns(), back=False)
        self.upgrade(m)
        c = self.consumers(m)
        self.assertEqual(c.returncode, 1, c.stderr)
        self.assertIn("kube-system/dcgm-exporter-abcde (container exporter) did not run again", c.stderr)
        outcomes = {x["pod"]: x["outcome"] for x in self.record(m)["consumers"]}
        self.assertEqual(outcomes, {"dcgm-exporter-abcde": "not-back", "nvdp-nvidia-device-plugin-x7k2p": "restarted"})
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 1, v.stdout)
        self.assertIn("kube-system/dcgm-exporter-abcde", v.stdout)
        stops = len(self.rt.stops)
        self.cmd(m, "refresh")
        self.assertEqual(self.consumers(m).returncode, 0)
        self.assertEqual(len(self.rt.stops), stops, "a consumer that did not come back was stopped again")
        self.assertEqual(self.rt.running(gone), {})

    def test_a_run_killed_after_its_stop_waits_and_never_stops_twice(self):
        m = self.machine()
        self.upgrade(m)
        # What a run killed right after its stop left: the stop recorded, no outcome, not finished;
        # kubelet has started the container again since.
        pod = self.rt.pods[self.plugin]
        (cid,) = self.rt.running(self.plugin)
        with self.rt.lock:
            self.rt.containers[cid]["state"] = "exited"
        self.rt._restart(self.plugin, "nvidia-device-plugin-ctr")
        write(m.p("/run/unbounded-nvidia/consumers.json"), json.dumps({
            "format": 1, "generation": 2, "finished": False, "runtime": "/run/containerd/containerd.sock",
            "runtime_warning": "", "restarts": {},
            "consumers": [{"namespace": "kube-system", "pod": pod["name"], "pod_uid": pod["uid"],
                           "container": "nvidia-device-plugin-ctr", "selector": "app.kubernetes.io/name=nvidia-device-plugin",
                           "outcome": "", "detail": ""}]}))
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertEqual(self.rt.stops, [])
        self.assertEqual([x["outcome"] for x in self.record(m)["consumers"]], ["restarted"])
        self.assertEqual(self.cmd(m, "verify").returncode, 0)

    def test_a_runtime_that_is_down_is_a_warning_naming_it(self):
        m = self.machine(runtime=False)
        self.upgrade(m)
        c = self.consumers(m)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("no container runtime socket", c.stderr)
        rec = self.record(m)
        self.assertTrue(rec["finished"])
        self.assertIn("were not restarted", rec["runtime_warning"])
        v = self.cmd(m, "verify")
        self.assertIn("were not restarted", json.dumps(v.result["warnings"]))

    def test_a_hung_runtime_socket_costs_a_bounded_wait(self):
        m = self.machine(runtime=False)
        import socket
        sockdir = tempfile.mkdtemp(prefix="cri-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", sockdir]))
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(sockdir, "c.sock"))
        s.listen(1)  # accepts nothing: a runtime that hangs
        self.addCleanup(s.close)
        os.makedirs(m.p("/run/containerd"), exist_ok=True)
        os.symlink(os.path.join(sockdir, "c.sock"), m.p("/run/containerd/containerd.sock"))
        self.upgrade(m)
        t0 = time.monotonic()
        c = self.consumers(m, timeout=40)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(c.returncode, 0, c.stderr)
        rec = self.record(m)
        self.assertIn("were not restarted", rec["runtime_warning"])
        # A runtime that is there but does not answer may hold consumers of the old driver: not done
        # with, verify names it, and the next refresh asks again.
        self.assertFalse(rec["finished"])
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 1, v.stdout)
        self.assertIn("the next refresh asks again", v.stdout)
        self.cmd(m, "refresh")
        self.assertEqual(len(self.starts()), 2)


if __name__ == "__main__":
    main()
