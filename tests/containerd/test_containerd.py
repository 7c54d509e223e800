#!/usr/bin/env python3
"""Issue 33, item 1: GPU pods through containerd's CRI in a booted machine.

A Debian trixie machine (systemd 257, Debian's containerd 1.7.24 and its own containerd.service, runc)
built by mkosi from tests/containerd/mkosi.conf.d/, with the project installed on top, booted with
systemd-nspawn on the unified cgroup hierarchy with bpf() allowed (runc's systemd cgroup driver
enforces device rules there). Its staging is Debian's real 535 driver (build/nvidia-debs, laid out
by debian_hosts.py as the podman tier does), bound read-only at /run/host-nvidia/N, with fake
/dev/nvidia* nodes (no driver: an allowed node opens with ENXIO, a denied one with EPERM) and a fake
module version. The test plays kubelet over /run/containerd/containerd.sock (cri.py), and each case
asserts what the container itself sees, through ExecSync.

Four boots serve every case: the scenario in the machine is a small command loop the host test drives
(`Node.sh`), so one boot holds many pods. Boot 1: ordering, the units, pods by CDIDevices and by
annotation, by index and UUID, an unknown device, no device, a daemon-reload, a host driver upgrade
under the old module (pending-host-reboot). Boot 2 (the new module loaded): a pod gets the new driver,
then CDI switched off, then a leftover spec of our kind at cdiVersion 0.8.0 (Debian's CDI library
reads it), then a library removed from the driver root. Boot 3 (the old module loaded again): setup fails, containerd
and kubelet are held back; the host loads the new module and starts a refresh, which starts them, and a
pod gets the driver. Boot 4: a stand-in device plugin pod follows a driver change and a GPU
change by itself (consumers.py), then a few random sequences of host events and machine actions, a
pod after each step (sequences.py)."""

import json
import os
import re
import shutil
import time
import unittest

import consumers
import probe_image
import sequences
from pods import ANALYZE, BINDS, RELOAD_PROBE, GpuNodeTier, gpu_pod_steps, leftover_spec_steps, parse, prepare_gpu_node, run_session
from unbounded_tests.harness import ARCH, main, proc_version_text

# systemd's catalogue: a job finished ("Finished ..."), a job began ("Starting ...").
JOB_DONE = "39f53479d3a045ac8e11786248231fbf"
JOB_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"

# containerd 1.7's CRI plugin: CDI is off by default there; runc with the systemd cgroup driver, as
# kubelet's systemd driver needs; the sandbox (pause) image is the local probe image (no registry).
CONTAINERD_CONFIG = """# Written by the containerd tier (tests/containerd/test_containerd.py)
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = {enable_cdi}
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  sandbox_image = "{image}"
  # containerd gives a sandbox oom_score_adj -998, which needs CAP_SYS_RESOURCE: this test host has
  # none to give the machine (its own bounding set lacks it), so pods keep containerd's own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
        # nspawn's system call filter refuses keyctl(): no session keyring per container (as the
        # system tier's runc runs with --no-new-keyring)
        NoNewKeyring = true
        # runc itself, less the CPU resources this host's cgroup tree cannot take (see the script)
        BinaryName = "/usr/local/libexec/unbounded-test/runc"
"""


class ContainerdTier(GpuNodeTier, unittest.TestCase):
    """Boots the machine twice in setUpClass and records what each case saw; each test asserts one."""

    SUMS_KEY = "root_sums_1"

    @classmethod
    def setUpClass(cls):
        ((cls.old, cls.v1), (cls.new, cls.v2)), base = cls.start("containerd", "containerd", ("bookworm-535", "trixie-550"), "trixie")
        m = cls.m
        cls.staging = prepare_gpu_node(m, cls.old, cls.v1, base, CONTAINERD_CONFIG.format(enable_cdi="true", image=probe_image.NAME))
        t0 = time.monotonic()
        run_session(m, cls.pb, cls.first_boot)
        cls.seen["boot1_s"] = time.monotonic() - t0
        m.fake_module(proc_version_text(cls.v2))  # the host rebooted into the new module
        t0 = time.monotonic()
        run_session(m, cls.pb, cls.second_boot)
        cls.seen["boot2_s"] = time.monotonic() - t0
        # Issue 43: the machine restarts while the host's module is the old one again (a host mid
        # kernel update): setup fails, containerd and kubelet are held back until the host loads the
        # module it staged and starts a refresh.
        m.fake_module(proc_version_text(cls.v1))
        m.write("/etc/unbounded/nvidia.yaml", "staging_timeout: 3s\nrefresh:\n  settle_time: 2s\n")
        t0 = time.monotonic()
        run_session(m, cls.pb, cls.third_boot)
        cls.seen["boot3_s"] = time.monotonic() - t0
        # Issue 47: random sequences from a ready machine (staging holds the new driver since boot 1,
        # and boot 3 ended with its module loaded).
        sequences.prepare(m, cls.staging)
        t0 = time.monotonic()
        run_session(m, cls.pb, cls.fourth_boot)
        cls.seen["boot4_s"] = time.monotonic() - t0
        print(f"# boot 1 took {cls.seen['boot1_s']:.0f}s, boot 2 {cls.seen['boot2_s']:.0f}s, boot 3 {cls.seen['boot3_s']:.0f}s, "
              f"boot 4 {cls.seen['boot4_s']:.0f}s", flush=True)

    @classmethod
    def first_boot(cls, node):
        seen = cls.seen
        seen["show"] = node.sh("systemctl show containerd.service -p Requires -p After -p ActiveState")
        seen["analyze"] = node.sh(ANALYZE)
        seen["systemd"] = node.sh("systemctl --version | head -1")
        seen["containerd"] = node.sh("containerd --version")
        seen["import"] = node.sh("ctr -n k8s.io images import /var/lib/unbounded-test/probe.tar", timeout=120)
        gpu_pod_steps(node, seen, cls.v1, cls.SUMS_KEY)
        # A daemon-reload while a pod runs: systemd re-applies the scope's DeviceAllow= (containerd's
        # runc with the systemd cgroup driver made it from the /dev/char links).
        sandbox, container = node.pod("reload", cdi=["nvidia.com/gpu=all"])
        seen["reload-before"] = node.exec(container, RELOAD_PROBE + "; mknod /tmp/d c 195 77; (exec 3</tmp/d) 2>&1 || true")
        seen["reload"] = node.sh("systemctl daemon-reload")
        seen["reload-after"] = node.exec(container, RELOAD_PROBE + "; (exec 3</tmp/d) 2>&1 || true")
        node.remove(sandbox)
        # The host upgrades its driver (535 -> 550) under the staging mounts with the 535 module still
        # loaded: the path unit's refresh keeps the live root (pending-host-reboot).
        for n, path in enumerate(BINDS):
            src = cls.m.host(f"upgrade/{n}")  # on the staging's filesystem, to be renamed in
            shutil.copytree(cls.new.p(path), src, symlinks=True) if os.path.isdir(cls.new.p(path)) else os.makedirs(src)
            live = cls.staging[n]
            for e in os.listdir(live):
                p = os.path.join(live, e)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
            for e in os.listdir(src):
                os.rename(os.path.join(src, e), os.path.join(live, e))
        seen["pending-status"] = node.sh("for i in $(seq 120); do grep -q '\"outcome\": \"pending-host-reboot\"' "
                                         "/run/unbounded-nvidia/status.json && break; sleep 0.25; done; "
                                         "cat /run/unbounded-nvidia/status.json", timeout=60)
        seen["pending"] = node.probe("pending", cls.v1, cdi=["nvidia.com/gpu=all"])

    @classmethod
    def second_boot(cls, node):
        seen = cls.seen
        seen["root_sums_2"] = node.sh(f"sha256sum /run/nvidia/driver/lib/{ARCH}/libcuda.so.{cls.v2} "
                                      f"/run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{cls.v2}")
        seen["restarted"] = node.probe("restarted", cls.v2, cdi=["nvidia.com/gpu=all"])
        # CDI switched off in containerd: the same pod, and what verify says.
        cls.m.write("/etc/containerd/config.toml", CONTAINERD_CONFIG.format(enable_cdi="false", image=probe_image.NAME))
        seen["cdi-off-restart"] = node.sh("systemctl restart containerd.service", timeout=120)
        node.reconnect()
        seen["cdi-off"] = node.probe("cdi-off", cls.v2, cdi=["nvidia.com/gpu=all"])
        seen["cdi-off-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        cls.m.write("/etc/containerd/config.toml", CONTAINERD_CONFIG.format(enable_cdi="true", image=probe_image.NAME))
        seen["cdi-on-restart"] = node.sh("systemctl restart containerd.service", timeout=120)
        node.reconnect()
        # A leftover spec at cdiVersion 0.8.0, which upstream's 1.7.24 refuses (its go.mod's CDI library
        # is 0.7.0) and Debian's, built with library 0.8.0, reads: the pod and verify agree on which.
        leftover_spec_steps(node, seen, cls.v2, "0.8.0")
        # The premise: a library removed from the driver root.
        seen["removed"] = node.sh(f"rm /run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{cls.v2}")
        seen["premise"] = node.probe("premise", cls.v2, cdi=["nvidia.com/gpu=all"])

    @classmethod
    def third_boot(cls, node):
        seen = cls.seen
        states = "systemctl is-active containerd.service kubelet.service unbounded-nvidia-setup.service; true"
        seen["heal-failed"] = node.sh(states)
        seen["heal-failed-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        cls.m.fake_module(proc_version_text(cls.v2))  # the host loads the module it staged ...
        seen["heal-refresh"] = node.sh("systemctl start unbounded-nvidia-refresh.service", timeout=300)  # ... and starts a refresh
        seen["heal-healed"] = node.sh("for i in $(seq 240); do systemctl is-active -q containerd.service kubelet.service && break; "
                                      "sleep 0.25; done; " + states, timeout=90)
        node.reconnect()  # containerd started after the channel was made
        seen["heal-pod"] = node.probe("healed", cls.v2, cdi=["nvidia.com/gpu=all"])
        seen["heal-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")

    @classmethod
    def fourth_boot(cls, node):
        case = cls("test_random_sequences_of_host_events_keep_verify_and_pods_agreeing")  # its assertions
        # The GPU consumers follow a driver change and a GPU change by themselves; the machine is
        # back at v2, ready, after it.
        cls.seen["consumers"] = consumers.follow_steps(case, node, cls.staging, (cls.v1, cls.v2), cls.v2)
        cls.seen["sequences"] = sequences.run(case, node, cls.staging, (cls.v1, cls.v2), cls.v2)

    # -- the assertions ----------------------------------------------------------------------------
    def test_00_machine_is_trixie_with_containerd_1_7(self):
        self.assertIn("systemd 257", self.ok("systemd")[1])
        self.assertIn(" 1.7.", self.ok("containerd")[1])
        self.assertEqual(self.ok("import")[0], 0, self.ok("import")[1])

    def test_containerd_started_only_after_setup_succeeded_on_each_boot(self):
        entries = self.m.journal("_PID=1")
        boots = []
        for e in entries:
            if e.get("_BOOT_ID") not in boots:
                boots.append(e.get("_BOOT_ID"))
        self.assertEqual(len(boots), 4)
        for b in boots:
            done = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("_BOOT_ID") == b and e.get("MESSAGE_ID") == JOB_DONE
                    and e.get("UNIT") == "unbounded-nvidia-setup.service" and e.get("JOB_RESULT") == "done"]
            start = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("_BOOT_ID") == b
                     and e.get("MESSAGE_ID") == JOB_STARTING and e.get("UNIT") == "containerd.service"]
            self.assertTrue(done, f"boot {b}: setup never finished successfully")
            self.assertTrue(start, f"boot {b}: containerd never started")
            self.assertLess(done[0], start[0], f"boot {b}: containerd started before setup succeeded")

    def test_units_verify_cleanly_on_systemd_257(self):
        rc, out = self.ok("analyze")
        self.assertEqual((rc, out), (0, ""), "systemd-analyze verify complained in the booted machine")

    def test_a_daemon_reload_keeps_the_running_pod_s_gpu(self):
        rc, before = self.ok("reload-before")
        self.assertIn("cannot open /dev/nvidia0: No such device or address", before)
        self.assertIn("Operation not permitted", before, "the device rules are not enforced")
        self.assertEqual(self.ok("reload")[0], 0, self.ok("reload")[1])
        rc, after = self.ok("reload-after")
        self.assertIn("cannot open /dev/nvidia0: No such device or address", after, "the pod lost its GPU across the daemon-reload")
        self.assertIn("cannot open /dev/nvidiactl: No such device or address", after)
        self.assertIn("Operation not permitted", after, "the device rules are gone after the daemon-reload")

    def test_pending_host_reboot_pods_get_the_live_root(self):
        rc, out = self.ok("pending-status")
        status = json.loads(out)
        self.assertEqual((status["outcome"], status["driver_version"], status["staged_driver_version"]),
                         ("pending-host-reboot", self.v1, self.v2), out)
        self.assertGpuPod(self.ok("pending"), self.sums("root_sums_1"), self.v1)

    def test_after_the_restart_pods_get_the_new_driver(self):
        self.assertGpuPod(self.ok("restarted"), self.sums("root_sums_2"), self.v2)

    def test_cdi_disabled_the_pod_sees_no_gpu_and_verify_says_why(self):
        self.assertEqual(self.ok("cdi-off-restart")[0], 0, self.ok("cdi-off-restart")[1])
        report = self.ok("cdi-off")
        self.assertNotIn("error", report, report)
        self.assertEqual(parse(report)["nodes"], [], report["out"])
        # The premise of every GPU case: this pod fails the assertion the GPU pods pass, and sees what
        # a pod that asked for nothing sees (no libcuda, the device rules enforced).
        with self.assertRaises(AssertionError):
            self.assertGpuPod(report, self.sums("root_sums_2"), self.v2)
        self.assertNoGpuPod(report)
        rc, out = self.ok("cdi-off-verify")
        self.assertEqual(rc, 1, out)
        v = json.loads(out)
        self.assertIn("containerd", v, out)
        self.assertIs(v["containerd"].get("cdi_enabled"), False, out)
        problems = [p for p in v.get("problems", []) if p.get("path") == "/etc/containerd/config.toml"]
        self.assertTrue(problems, f"no problem names /etc/containerd/config.toml: {out}")
        self.assertTrue(any("enable_cdi" in p.get("message", "") for p in problems), out)

    def test_a_leftover_spec_at_0_8_0_wins_as_debians_cdi_library_reads_it(self):
        v = self.assertLeftoverWins()
        c = v["containerd"]
        self.assertEqual(c["version"], re.search(r" v?(1\.7\.\d+)", self.ok("containerd")[1]).group(1), c)
        self.assertEqual(c["max_cdi_version"], "0.8.0", c)
        self.assertTrue(c["max_cdi_version_from"].startswith("Built-Using of containerd in /var/lib/dpkg/status"), c)
        self.assertIn("container-device-interface 0.8.0", c["max_cdi_version_from"], c)

    def test_a_failed_boot_heals_when_the_host_loads_its_module(self):
        """Issue 43 on systemd 257 with Debian's containerd: held back with verify naming both units,
        started by the refresh the host starts once its module is loaded, and a GPU pod then gets the
        driver."""
        rc, out = self.ok("heal-failed")
        self.assertEqual(out.split(), ["inactive", "inactive", "failed"], out)
        rc, out = self.ok("heal-failed-verify")
        self.assertEqual(rc, 1, out)
        problems = {p["path"]: p["message"] for p in json.loads(out)["problems"]}
        for unit in ("containerd.service", "kubelet.service"):
            self.assertIn("held it back", problems.get(unit, ""), out)
        self.assertEqual(self.ok("heal-refresh")[0], 0, self.ok("heal-refresh")[1])
        rc, out = self.ok("heal-healed")
        self.assertEqual(out.split(), ["active", "active", "active"], out)
        self.assertGpuPod(self.ok("heal-pod"), self.sums("root_sums_2"), self.v2)
        rc, out = self.ok("heal-verify")
        self.assertEqual(rc, 0, out)
        self.assertTrue(json.loads(out)["ready"], out)

    def test_a_library_removed_from_the_root_fails_the_pod(self):
        self.assertEqual(self.ok("cdi-on-restart")[0], 0, self.ok("cdi-on-restart")[1])
        self.assertEqual(self.ok("removed")[0], 0, self.ok("removed")[1])
        report = self.ok("premise")
        with self.assertRaises(AssertionError, msg="a pod passed with libnvidia-ml removed from the root"):
            self.assertGpuPod(report, self.sums("root_sums_2"), self.v2)
        self.assertIn("error", report, report)
        self.assertIn(f"libnvidia-ml.so.{self.v2}", report["error"])

    def test_the_gpu_consumers_follow_a_driver_and_a_gpu_change_by_themselves(self):
        consumers.check(self, self.seen["consumers"], self.v1)

    def test_random_sequences_of_host_events_keep_verify_and_pods_agreeing(self):
        """Issue 47, item 4 (sequences.py): after every step of every sequence, verify ready meant the
        pod got the module's driver and its GPUs, a pod's driver was one version, the root's, and a
        host that staged and loaded one version with a GPU there was ready after a refresh."""
        r = self.ok("sequences")
        if r["failure"]:
            self.fail(r["failure"])
        self.assertEqual(r["stats"]["steps"], sequences.SEQUENCES * sequences.STEPS, r["story"])
        # each sequence starts ready (the truthful check ran on a pod given the driver at least then)
        self.assertGreaterEqual(r["stats"]["ready"], sequences.SEQUENCES, r["story"])


if __name__ == "__main__":
    main()
