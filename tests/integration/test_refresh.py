#!/usr/bin/env python3
"""`refresh`: host driver changes applied while the machine runs, as the loaded kernel module allows,
and the device plugin's spec never failing setup or refresh. Fake machine roots under --root."""

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from unbounded_tests.harness import PLUGIN_SPEC, SETUP, V1, V2, MachineRoot, main, plugin_spec, snapshot, write

SPEC = "/etc/cdi/nvidia.yaml"
QUICK = "refresh:\n  settle_time: 0s\n"
WAITING = "Another unbounded-nvidia-setup run is in progress, waiting for it to finish."
IS_ROOT = os.geteuid() == 0


class RefreshCase(unittest.TestCase):
    def running_machine(self, version=V1, config=QUICK):
        """A machine whose boot setup built `version`, with the module of that version loaded."""
        m = MachineRoot(self).standard(version)
        if config:
            m.config(config)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        return m

    def upgrade_staging(self, m, version, module=None):
        """The host replaced its userspace by `version` (and loaded that module when asked)."""
        m.clear_staging()
        m.stage_all(version)
        if module:
            m.set_proc_version(module)

    def refresh(self, m, rc=0):
        r = m.run("--json", "refresh")
        self.assertEqual(r.returncode, rc, r.stderr)
        r.result = json.loads(r.stdout)
        return r

    def verify(self, m):
        r = m.run("--json", "verify")
        r.result = json.loads(r.stdout)
        return r

    def status(self, m):
        with open(m.p("/run/unbounded-nvidia/status.json")) as f:
            return json.load(f)

    def live(self, m):
        return snapshot(m.driver_root()), open(m.p(SPEC)).read()

    def assertHolds(self, m, version, other):
        self.assertTrue(os.path.isfile(os.path.join(m.libdir(), f"libcuda.so.{version}")))
        self.assertFalse(os.path.exists(os.path.join(m.libdir(), f"libcuda.so.{other}")))
        spec = open(m.p(SPEC)).read()
        self.assertIn(f"libcuda.so.{version}", spec)
        self.assertNotIn(other, spec)


class TestOutcomes(RefreshCase):
    def test_nothing_changed_copies_nothing(self):
        m = self.running_machine()
        before = self.live(m)
        r = self.refresh(m)
        self.assertEqual(r.result["command"], "refresh")
        self.assertEqual(r.result["outcome"], "ready")
        self.assertTrue(r.result["unchanged"])
        self.assertEqual(r.result["bytes_copied"], 0)
        self.assertFalse(r.result["cdi_spec_written"])
        self.assertEqual(self.live(m), before)

    def test_a_refresh_that_changed_nothing_says_so_only_at_debug_level(self):
        # Issue 46: the timer's refresh logged "Driver ... ready" with its MESSAGE_ID every 5
        # minutes on every node. Unchanged: nothing at info (the journal's MESSAGE_ID line is that
        # one); with UNBOUNDED_NVIDIA_LOG_LEVEL=debug, the line without a MESSAGE_ID.
        m = self.running_machine()
        r = self.refresh(m)
        self.assertTrue(r.result["unchanged"])
        self.assertNotIn("ready in", r.stderr)
        r = m.run("--json", "refresh", env={"UNBOUNDED_NVIDIA_LOG_LEVEL": "debug"})
        self.assertIn(f"Driver {V1} ready in /run/nvidia/driver", r.stderr)
        # A refresh that writes something says it as before.
        self.upgrade_staging(m, V2, module=V2)
        r = self.refresh(m)
        self.assertIn(f"Driver {V2} ready in /run/nvidia/driver", r.stderr)

    def test_userspace_upgrade_with_the_old_module_keeps_the_root_and_its_spec(self):
        m = self.running_machine()
        before = self.live(m)
        self.upgrade_staging(m, V2)  # the module stays V1 until the host reboots
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "pending-host-reboot")
        self.assertTrue(r.result["ready"])
        self.assertEqual(r.result["driver_version"], V1)
        self.assertEqual(r.result["staged_driver_version"], V2)
        self.assertEqual(r.result["kernel_module_version"], V1)
        self.assertTrue(r.result["driver_root_kept"])
        self.assertIn(f"Host staged driver {V2} but the loaded kernel module is {V1}", r.stderr)
        self.assertEqual(self.live(m), before)
        self.assertEqual(self.status(m)["outcome"], "pending-host-reboot")
        v = self.verify(m)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.result["outcome"], "pending-host-reboot")
        self.assertEqual(v.result["staged_driver_version"], V2)

    def test_setup_run_by_hand_while_pending_keeps_the_root_too(self):
        m = self.running_machine()
        before = self.live(m)
        self.upgrade_staging(m, V2)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "pending-host-reboot")
        self.assertEqual(self.live(m), before)

    def test_module_and_userspace_upgrade_swaps_root_and_spec(self):
        m = self.running_machine()
        self.upgrade_staging(m, V2, module=V2)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertEqual(r.result["driver_version"], V2)
        self.assertTrue(r.result["cdi_spec_written"])
        self.assertHolds(m, V2, V1)
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])
        v = self.verify(m)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.result["outcome"], "ready")

    def test_module_reload_is_picked_up_without_a_staging_change(self):
        m = self.running_machine()
        self.upgrade_staging(m, V2)
        self.assertEqual(self.refresh(m).result["outcome"], "pending-host-reboot")
        m.set_proc_version(V2)  # the host reloaded the module; nothing in staging changed
        v = self.verify(m)
        self.assertEqual(v.returncode, 1)
        self.assertIn("start unbounded-nvidia-refresh.service", v.stderr)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertHolds(m, V2, V1)

    def test_staging_mid_upgrade_keeps_the_root_and_tries_again(self):
        m = self.running_machine()
        before = self.live(m)
        # libcuda already replaced, libnvidia-ml not yet: a package manager half way through
        d = m.p("/run/host-nvidia/0")
        m.clear_staging()
        m.stage_all(V2)
        os.unlink(os.path.join(d, f"libnvidia-ml.so.{V2}"))
        shutil.copy(os.path.join(MachineRoot(self).stage_ubuntu(V1), f"libnvidia-ml.so.{V1}"), d)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "staging-inconsistent")
        self.assertTrue(r.result["ready"])
        self.assertIn("Driver version mismatch", r.stderr)
        self.assertIn(f"keeping driver root {V1}, trying again on the next change", r.stderr)
        self.assertTrue(any("mismatch" in w for w in r.result["warnings"]))
        self.assertEqual(self.live(m), before)
        # The upgrade completes and the host reboots into the new module: the next refresh applies it.
        self.upgrade_staging(m, V2, module=V2)
        self.assertEqual(self.refresh(m).result["outcome"], "ready")
        self.assertHolds(m, V2, V1)

    def test_staging_gone_keeps_the_root_and_reports_not_ready(self):
        m = self.running_machine()
        before = self.live(m)
        m.clear_staging()
        r = self.refresh(m, rc=1)
        self.assertEqual(r.result["outcome"], "staging-gone")
        self.assertFalse(r.result["ready"])
        self.assertIn("staging mounts are gone", r.stderr)
        self.assertEqual(self.live(m), before)
        v = self.verify(m)
        self.assertEqual(v.returncode, 1)
        self.assertEqual(v.result["outcome"], "staging-gone")

    def test_unknown_module_keeps_a_working_root_of_another_version(self):
        m = self.running_machine()
        before = self.live(m)
        os.unlink(m.p("/proc/driver/nvidia/version"))
        self.upgrade_staging(m, V2)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "pending-host-reboot")
        self.assertIn("kernel module version is unknown", r.stderr)
        self.assertEqual(self.live(m), before)

    def test_setup_with_an_unreadable_module_builds_from_staging(self):
        """The boot decision: with no /proc/driver/nvidia/version, staging is the only witness."""
        m = MachineRoot(self).standard(V1)
        os.unlink(m.p("/proc/driver/nvidia/version"))
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertTrue(any(w.startswith("Kernel module version unknown") for w in r.result["warnings"]), r.result["warnings"])
        self.assertHolds(m, V1, V2)


class TestDevicePluginSpec(RefreshCase):
    def test_a_stale_device_plugin_spec_never_fails_setup(self):
        m = MachineRoot(self).standard(V1)
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V2))  # left from before the machine restart
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertFalse(r.result["device_plugin_spec_current"])
        self.assertIn("NVIDIA device plugin", r.stderr)

    def test_refresh_swapping_under_the_plugin_spec_succeeds_and_verify_says_what_to_do(self):
        m = self.running_machine()
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        self.assertEqual(self.verify(m).returncode, 0)
        self.upgrade_staging(m, V2, module=V2)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertFalse(r.result["device_plugin_spec_current"])
        # The plugin's spec stays where it is (it is the plugin's file), and verify stays not ready
        # with the cure in the message until the plugin has written a current spec.
        self.assertTrue(os.path.exists(m.p(PLUGIN_SPEC)))
        v = self.verify(m)
        self.assertEqual(v.returncode, 1)
        self.assertEqual(v.result["outcome"], "not-ready")
        [p] = v.result["problems"]
        self.assertEqual(p["path"], PLUGIN_SPEC)
        self.assertIn(f"The NVIDIA device plugin's CDI spec does not match driver {V2}", p["message"])
        self.assertIn(f"libcuda.so.{V2}", p["message"])
        self.assertIn("Restart the NVIDIA device plugin pod on this node", p["message"])
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V2))  # the restarted plugin
        self.assertEqual(self.verify(m).returncode, 0)


class TestSettle(RefreshCase):
    def touch_staging(self, m):
        """What a package manager does to a lib dir: create and rename entries."""
        d = m.p("/run/host-nvidia/0")
        write(os.path.join(d, ".dpkg-new"), "x")
        os.rename(os.path.join(d, ".dpkg-new"), os.path.join(d, "libfoo.so.1"))

    def test_refresh_waits_until_staging_has_been_quiet(self):
        m = self.running_machine(config="refresh:\n  settle_time: 2s\n")
        self.touch_staging(m)
        r = self.refresh(m)
        self.assertGreater(r.result["settle_waited_ms"], 0)
        self.assertEqual(r.result["outcome"], "ready")

    def test_staging_that_was_quiet_long_enough_is_read_at_once(self):
        m = self.running_machine(config="refresh:\n  settle_time: 1s\n")
        time.sleep(1.2)  # everything in staging is now older than the settle time
        r = self.refresh(m)
        self.assertEqual(r.result["settle_waited_ms"], 0)

    def test_the_wait_is_bounded(self):
        m = self.running_machine(config="refresh:\n  settle_time: 60s\n  settle_limit: 1s\n")
        self.touch_staging(m)
        r = self.refresh(m)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertTrue(any("was still changing after 1s (refresh.settle_limit)" in w for w in r.result["warnings"]),
                        r.result["warnings"])

    def refresh_changing_staging_meanwhile(self, m):
        """Holds the run lock: the refresh settles, then waits for the lock inside its pass; the host
        changes a staging tree, the lock is released, and the pass reads on."""
        with open(m.p("/run/unbounded-nvidia/lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            p = subprocess.Popen([SETUP, "--root", m.path, "--json", "refresh"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=m.run_env())
            try:
                ready, _, _ = select.select([p.stderr], [], [], 60)
                self.assertTrue(ready, "the refresh did not say it waits for the lock")
                line = p.stderr.readline()
                self.assertIn(WAITING, line)
                self.touch_staging(m)
                fcntl.flock(lock, fcntl.LOCK_UN)
                out, err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
        self.assertEqual(p.returncode, 0, err)
        self.assertWentAgain(json.loads(out), line + err)

    def assertWentAgain(self, result, err):
        """A refresh that saw staging change during its first pass and read it again, ready."""
        self.assertEqual(result["passes"], 2, err)
        self.assertEqual(result["outcome"], "ready", err)
        self.assertIn("changed while the refresh ran, refreshing again", err)

    def test_staging_changed_during_the_pass_is_refreshed_again(self):
        """A refresh stamps staging after its pass too: a change made while it worked, which the path
        unit does not see (systemd drops its watches while the service runs), makes it go again."""
        self.refresh_changing_staging_meanwhile(self.running_machine())

    def test_more_staging_directories_than_the_watch_holds_open(self):
        """Past StagingWatch::MAX_HELD (128) directories the settle walk keeps none open: the check after
        the pass walks again and discovery opens staging itself, with the same answers."""
        m = self.running_machine()
        for i in range(10, 140):
            os.makedirs(m.p(f"/run/host-nvidia/{i}"))
        self.assertEqual(m.setup().returncode, 0)
        before = self.live(m)
        r = self.refresh(m)
        self.assertEqual((r.result["passes"], r.result["outcome"]), (1, "ready"), r.stderr)
        self.assertEqual(self.live(m), before)
        self.refresh_changing_staging_meanwhile(m)

    @unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private mount namespace")
    def test_a_tree_mounted_over_during_the_pass_is_refreshed_again(self):
        """A host that binds a new tree over a staging directory changes no directory's times: the
        check after the pass, which asks the directories the settle walk kept open, must see the mount
        (/proc/self/mountinfo polls as changed) and walk afresh. The same lock dance as above, with
        the refresh and the mount in one private mount namespace."""
        m = self.running_machine()
        tree = m.p("/run/host-nvidia/1")
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        copy = os.path.join(out, "tree-1-again")
        shutil.copytree(tree, copy, symlinks=True)
        script = f"""
            "{SETUP}" --root "{m.path}" --json refresh >"{out}/out" 2>"{out}/err" &
            pid=$!
            n=0
            until grep -q "waiting for it to finish" "{out}/err"; do
                n=$((n + 1)); [ $n -lt 3000 ] || {{ kill $pid; exit 91; }}; sleep 0.02
            done
            mount --bind "{copy}" "{tree}" || {{ kill $pid; exit 90; }}
            touch "{out}/mounted"
            wait $pid
            echo $? >"{out}/rc"
        """
        with open(m.p("/run/unbounded-nvidia/lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=m.run_env())
            try:
                deadline = time.monotonic() + 60
                while not os.path.exists(f"{out}/mounted") and p.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                fcntl.flock(lock, fcntl.LOCK_UN)
                _, script_err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
        self.assertEqual(p.returncode, 0, script_err)
        err = open(f"{out}/err").read()
        self.assertEqual(open(f"{out}/rc").read().strip(), "0", err)
        self.assertWentAgain(json.loads(open(f"{out}/out").read()), err)

    def test_an_unchanged_staging_is_read_in_one_pass(self):
        m = self.running_machine()
        r = self.refresh(m)
        self.assertEqual(r.result["passes"], 1, r.stderr)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertNotIn("refreshing again", r.stderr)


if __name__ == "__main__":
    main()
