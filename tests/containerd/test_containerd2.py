#!/usr/bin/env python3
"""Issue 33, item 1, on containerd 2.x: the pod cases on Debian sid's containerd (2.1), whose CRI
plugin has CDI on by default and reads configuration version 3, where the CRI tables are
[plugins.'io.containerd.cri.v1.runtime'] and [plugins.'io.containerd.cri.v1.images'], and whose
systemd is the newest Debian has (the generated and shipped units verified on it too).

The machine is the trixie tier's GPU node (pods.py: Debian's real 535 driver as staging, fake nodes,
module and GPUs, the kubelet stand-in over the CRI socket) on a sid image built by mkosi from
tests/containerd/sid/mkosi.conf.d/, booted once. Its containerd.toml names no enable_cdi and no
cdi_spec_dirs: what 2.x does by default is what is tested, and what verify says it does. Then,
in the same boot, what verify reads from files only is held against what this containerd does:
- a leftover /var/run/cdi/nvidia.yaml of our kind (as nvidia-cdi-refresh writes it) that defines
  nvidia.com/gpu=all with one GPU: a pod asking for `all` gets that spec's one GPU, not ours, and
  verify says the file wins;
- enable_cdi = false in the version-3 table: the pod sees no GPU and verify names the key.
Before those, a stand-in device plugin pod follows a driver change (to trixie's 550 and back) and a GPU
change by itself, through this containerd's CRI (consumers.py). One boot, not two: the restart and the
daemon-reload are the trixie tier's cases, and nothing in them depends on containerd's version."""

import json
import re
import time
import unittest

import consumers
import probe_image
import sequences
from pods import ANALYZE, GpuNodeTier, gpu_pod_steps, leftover_spec_steps, parse, prepare_gpu_node, run_session
from unbounded_tests.harness import main

# systemd's catalogue: a job finished ("Finished ..."), a job began ("Starting ...").
JOB_DONE = "39f53479d3a045ac8e11786248231fbf"
JOB_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"

# containerd 2.x, configuration version 3. CDI is not named: 2.x has it on, reading /etc/cdi and
# /var/run/cdi. The rest as the trixie tier's, in 2.x's tables: runc with the systemd cgroup driver,
# the probe image as the sandbox image, and this host's two limits (see test_containerd.py).
CONTAINERD2_CONFIG = """# Written by the containerd 2.x tier (tests/containerd/test_containerd2.py)
version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{image}"

[plugins.'io.containerd.cri.v1.runtime']
{cdi}  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = true
        NoNewKeyring = true
        BinaryName = "/usr/local/libexec/unbounded-test/runc"
"""

class Containerd2Tier(GpuNodeTier, unittest.TestCase):
    """Boots the sid machine once in setUpClass and records what each case saw; each test asserts one."""

    SUMS_KEY = "root_sums"

    @classmethod
    def setUpClass(cls):
        # trixie's 550 only for the driver change the GPU consumers follow (consumers.py).
        ((cls.host, cls.v1), (_, cls.v2)), base = cls.start("containerd2", "containerd 2.x", ("bookworm-535", "trixie-550"), "sid")
        m = cls.m
        cls.staging = prepare_gpu_node(m, cls.host, cls.v1, base, CONTAINERD2_CONFIG.format(cdi="", image=probe_image.NAME))
        sequences.prepare(m, cls.staging)
        t0 = time.monotonic()
        run_session(m, cls.pb, cls.boot)
        seen = cls.seen
        print(f"# the boot took {time.monotonic() - t0:.0f}s; {seen.get('systemd', (0, '?'))[1].strip()}; "
              f"{seen.get('containerd', (0, '?'))[1].strip()}; verify exited {seen.get('verify-default', ('?',))[0]} "
              f"with CDI on by default, {seen.get('shadow-verify', ('?',))[0]} with the leftover spec, "
              f"{seen.get('cdi-off-verify', ('?',))[0]} with CDI off", flush=True)

    @classmethod
    def boot(cls, node):
        seen, v = cls.seen, cls.v1
        seen["show"] = node.sh("systemctl show containerd.service -p Requires -p After -p ActiveState")
        # The job messages of this boot, read in the machine: the host's journalctl is older than
        # the journal files sid's journald writes.
        seen["jobs"] = node.sh(f"journalctl -b -o json --no-pager _PID=1 MESSAGE_ID={JOB_DONE} + _PID=1 MESSAGE_ID={JOB_STARTING}")
        seen["analyze"] = node.sh(ANALYZE)
        seen["systemd"] = node.sh("systemctl --version | head -1")
        seen["containerd"] = node.sh("containerd --version")
        seen["static-built-using"] = node.sh("dpkg-query -W -f='${Static-Built-Using}' containerd")
        seen["import"] = node.sh("ctr -n k8s.io images import /var/lib/unbounded-test/probe.tar", timeout=120)
        gpu_pod_steps(node, seen, v, cls.SUMS_KEY)
        seen["verify-default"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        # The GPU consumers follow a driver change and a GPU change by themselves; back at v1 after.
        case = cls("test_the_gpu_consumers_follow_a_driver_and_a_gpu_change_by_themselves")
        seen["consumers"] = consumers.follow_steps(case, node, cls.staging, (v, cls.v2), v)
        # nvidia-cdi-refresh's leftover: what containerd gives a pod, and what verify says.
        leftover_spec_steps(node, seen, v, "0.5.0")
        # CDI switched off in 2.x's table.
        cls.m.write("/etc/containerd/config.toml", CONTAINERD2_CONFIG.format(cdi="  enable_cdi = false\n", image=probe_image.NAME))
        seen["cdi-off-restart"] = node.sh("systemctl restart containerd.service", timeout=120)
        node.reconnect()
        seen["cdi-off"] = node.probe("cdi-off", v, cdi=["nvidia.com/gpu=all"])
        seen["cdi-off-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")

    # -- the assertions ----------------------------------------------------------------------------
    def test_the_gpu_consumers_follow_a_driver_and_a_gpu_change_by_themselves(self):
        consumers.check(self, self.seen["consumers"], self.v2)

    def test_00_machine_is_sid_with_containerd_2(self):
        self.assertRegex(self.ok("systemd")[1], r"^systemd 2[6-9]\d")
        self.assertRegex(self.ok("containerd")[1], r" v?2\.\d+\.\d+")
        self.assertEqual(self.ok("import")[0], 0, self.ok("import")[1])

    def test_containerd_started_only_after_setup_succeeded(self):
        rc, out = self.ok("jobs")
        self.assertEqual(rc, 0, out)
        entries = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        done = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("MESSAGE_ID") == JOB_DONE
                and e.get("UNIT") == "unbounded-nvidia-setup.service" and e.get("JOB_RESULT") == "done"]
        start = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("MESSAGE_ID") == JOB_STARTING and e.get("UNIT") == "containerd.service"]
        self.assertTrue(done, "setup never finished successfully")
        self.assertTrue(start, "containerd never started")
        self.assertLess(done[0], start[0], "containerd started before setup succeeded")

    def test_units_verify_cleanly_on_sid_s_systemd(self):
        rc, out = self.ok("analyze")
        self.assertEqual((rc, out), (0, ""), "systemd-analyze verify complained in the booted machine")

    def test_verify_reads_2_x_defaults_as_containerd_does(self):
        """No enable_cdi in the file: verify takes 2.x's default (on), its directories and the spec
        version its CDI library accepts, from the package it finds (the pods above got GPUs with the
        same file: test_pod_through_the_cdi_devices_field)."""
        rc, v = self.verify_json("verify-default")
        self.assertEqual(rc, 0, v)  # ready: nothing in the consumer checks, nor anywhere else
        c = v["containerd"]
        self.assertIs(c["cdi_enabled"], True, c)
        self.assertIn("default of containerd 2.", c["cdi_enabled_from"], c)
        self.assertEqual([d.rstrip("/") for d in c["cdi_spec_dirs"]], ["/etc/cdi", "/var/run/cdi"], c)
        # The version containerd itself reports.
        version = re.search(r" v?(2\.\d+\.\d+)", self.ok("containerd")[1]).group(1)
        self.assertEqual(c["version"], version, c)
        # The CDI library this package was built with, as dpkg-query reads the package's
        # Static-Built-Using, decides the newest spec version: the library's major.minor.0.
        rc, field = self.ok("static-built-using")
        self.assertEqual(rc, 0, field)
        lib = re.search(r"(golang-tags\.cncf-container-device-interface|"
                        r"golang-github-container-orchestrated-devices-container-device-interface) \(= ([^)\s]+)\)", field)
        self.assertIsNotNone(lib, f"containerd's Static-Built-Using names no CDI library: {field}")
        # Debian's version: an epoch, a v, a "+really" naming the version packaged after a downgrade
        real = re.match(r"v?(\d+)\.(\d+)", lib.group(2).split(":")[-1].split("+really")[-1])
        self.assertIsNotNone(real, lib.group(0))
        self.assertEqual(c["max_cdi_version"], f"{int(real.group(1))}.{int(real.group(2))}.0", c)
        self.assertIn(f"Static-Built-Using of containerd in /var/lib/dpkg/status: {lib.group(1)} ", c["max_cdi_version_from"], c)
        self.assertEqual(v["consumer_findings"].get("cdi-disabled", 0), 0, v["consumer_findings"])
        self.assertFalse([p for p in v.get("problems", []) if "containerd" in p.get("path", "") or "/cdi/" in p.get("path", "")], v)

    def test_a_leftover_spec_of_our_kind_wins_in_containerd_and_verify_says_so(self):
        self.assertLeftoverWins()

    def test_cdi_disabled_in_the_version_3_table_the_pod_sees_no_gpu_and_verify_says_why(self):
        self.assertEqual(self.ok("cdi-off-restart")[0], 0, self.ok("cdi-off-restart")[1])
        report = self.ok("cdi-off")
        self.assertNotIn("error", report, report)
        self.assertEqual(self.ok("shadow-remove")[0], 0, self.ok("shadow-remove")[1])  # nothing else gives GPUs
        self.assertEqual(parse(report)["nodes"], [], report["out"])
        with self.assertRaises(AssertionError):  # the premise of the GPU cases
            self.assertGpuPod(report, self.sums("root_sums"), self.v1)
        self.assertNoGpuPod(report)
        rc, v = self.verify_json("cdi-off-verify")
        self.assertEqual(rc, 1, v)
        self.assertIs(v["containerd"]["cdi_enabled"], False, v["containerd"])
        problems = [p for p in v.get("problems", []) if p.get("path") == "/etc/containerd/config.toml"]
        self.assertTrue(any("enable_cdi" in p.get("message", "") and "io.containerd.cri.v1.runtime" in p.get("message", "")
                            for p in problems), v.get("problems"))


if __name__ == "__main__":
    main()
