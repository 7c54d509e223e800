#!/usr/bin/env python3
"""The license reloader's restart of nvidia-gridd through the real binary on fake roots. The service
manager is the tests' PID 1 on the root's private socket (fake_systemd.py), whose nvidia-gridd.service
runs a stand-in daemon: a shell script that reads the installed files only at its start, as nvidia-gridd
does, logs that start with a digest of them, exits at once on a gridd.conf that says BROKEN, and logs
the SIGTERM that stops it. A rotation is one SIGTERM and one start; an unchanged source restarts
nothing; a broken rotation is rolled back, then known bad; a unit that could be SIGKILLed is refused;
a --root run without a manager's socket has no service manager and says so."""

import hashlib
import json
import os
import re
import signal
import subprocess
import unittest

from unbounded_tests.fake_systemd import FakeSystemd
from unbounded_tests.harness import MachineRoot, fixture, main, write

LICENSE_BIN = os.environ.get("LICENSE_BIN", "")
UNIT = "nvidia-gridd.service"
SOURCE = "/run/host-nvidia-licensing"
CONF = "/etc/nvidia/gridd.conf"
TOKEN = "/etc/nvidia/ClientConfigToken/client_configuration_token.tok"
METRICS = "/var/lib/prometheus/node-exporter/unbounded-nvidia-license.prom"
CONFIG = "licensing:\n  jitter: 0s\n  settle_time: 300ms\n  stop_timeout: 5s\n"
GOOD, GOOD2, BROKEN = "FeatureType=1\n", "FeatureType=2\n", "BROKEN\n"

# `sleep & wait`: the trap runs as soon as the signal comes, not after a sleep ends.
GRIDD = """#!/bin/sh
echo "start $(cat {conf} {token} | sha256sum | cut -c1-16)" >> {log}
case "$(cat {conf})" in *BROKEN*) exit 1 ;; esac
trap 'echo TERM >> {log}; kill $! 2>/dev/null; exit 0' TERM
sleep 1000 &
wait
"""


def digest(conf, token):
    return hashlib.sha256((conf + token).encode()).hexdigest()[:16]


class LicenseReloadCase(unittest.TestCase):
    def setUp(self):
        self.m = m = MachineRoot(self)
        m.config(CONFIG)
        os.makedirs(m.p(os.path.dirname(METRICS)))
        self.gridd = m.p("/usr/bin/nvidia-gridd")
        self.log = m.p("/var/log/nvidia-gridd.log")
        os.makedirs(os.path.dirname(self.log))
        write(self.gridd, GRIDD.format(conf=m.p(CONF), token=m.p(TOKEN), log=self.log), 0o755)
        self.units_file = m.path + "-units.json"  # beside the root, as PID 1 is outside the machine's files
        self.addCleanup(lambda: os.path.exists(self.units_file) and os.unlink(self.units_file))
        self.addCleanup(self.kill_gridd)
        # Before any restart, as the file has it: active, with no process the fake started (a stop
        # signals nothing).
        self.units({UNIT: {"active_state": "active", "exec": [self.gridd]}})
        self.pid1 = FakeSystemd(m.path, self.units_file).start()
        self.addCleanup(self.pid1.stop)
        # What the boot install left: the source's files, installed.
        self.rotate(GOOD, "token-1")
        write(m.p(CONF), GOOD)
        write(m.p(TOKEN), "token-1", 0o600)
        self.seen_calls = 0
        self.seen_log = 0

    def units(self, units):
        with open(self.units_file, "w") as f:
            json.dump({"units": units, "calls": []}, f)

    def entry(self):
        with open(self.units_file) as f:
            return json.load(f)["units"][UNIT]

    def set_entry(self, **fields):
        with open(self.units_file) as f:
            doc = json.load(f)
        doc["units"][UNIT].update(fields)
        with open(self.units_file, "w") as f:
            json.dump(doc, f)

    def rotate(self, conf=None, token=None):
        if conf is not None:
            write(self.m.p(f"{SOURCE}/gridd.conf"), conf)
        if token is not None:
            write(self.m.p(f"{SOURCE}/client_configuration_token.tok"), token)

    def installed(self):
        return open(self.m.p(CONF)).read(), open(self.m.p(TOKEN)).read()

    def new_calls(self):
        """The stops and starts asked of the fake manager since the last look."""
        with open(self.units_file) as f:
            calls = json.load(f)["calls"]
        new, self.seen_calls = calls[self.seen_calls:], len(calls)
        return [c for c in new if not c.startswith("state ")]

    def new_log(self):
        """What the stand-in logged since the last look."""
        lines = open(self.log).read().splitlines() if os.path.exists(self.log) else []
        new, self.seen_log = lines[self.seen_log:], len(lines)
        return new

    def counters(self):
        try:
            text = open(self.m.p(METRICS)).read()
        except FileNotFoundError:
            return {}
        return {k: float(v) for k, v in re.findall(r'^unbounded_nvidia_license_reloads_total\{outcome="([^"]+)"\} (\S+)$', text, re.M)}

    def reload(self, fake=True):
        """One run (not --boot); r.outcome is the outcome the metrics counted for it."""
        before = self.counters()
        if not fake:
            self.pid1.stop()
        # The stand-in outlives the run: a daemon that kept our stdout would hold this up to the timeout.
        r = self.m.run(binary=LICENSE_BIN, timeout=30)
        after = self.counters()
        r.outcome = [k for k, v in after.items() if v != before.get(k, 0)]
        return r

    def running(self):
        """The stand-ins that run (not exited: a zombie's cmdline is empty)."""
        pids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if self.gridd.encode() in cmdline:
                pids.append(int(pid))
        return pids

    def kill_gridd(self):
        for pid in self.running():
            try:
                os.killpg(pid, signal.SIGKILL)  # its group: the shell and its sleep
            except OSError:
                pass

    def assert_runs(self, rc, outcome, r):
        self.assertEqual((r.returncode, r.outcome), (rc, [outcome]), r.stderr)

    def running_gridd(self):
        """The first run records the installed files; a rotation then starts the stand-in."""
        self.assert_runs(0, "recorded", self.reload())
        self.rotate(token="token-2")
        self.assert_runs(0, "applied", self.reload())
        self.assertEqual(self.new_log(), [f"start {digest(GOOD, 'token-2')}"])
        self.new_calls()
        self.assertEqual(self.running(), [self.entry()["main_pid"]])
        return self.entry()["main_pid"]


class TestRestart(LicenseReloadCase):
    def test_the_first_run_records_the_installed_files_and_restarts_nothing(self):
        r = self.reload()
        self.assert_runs(0, "recorded", r)
        self.assertEqual(self.new_calls(), [])
        self.assertEqual(self.new_log(), [])
        self.assertIn("Recorded the installed licensing files", r.stderr)

    def test_a_rotation_is_one_sigterm_and_one_start(self):
        old = self.running_gridd()
        self.rotate(token="token-3")
        r = self.reload()
        self.assert_runs(0, "applied", r)
        self.assertEqual(self.new_calls(), [f"stop {UNIT} signal 15", f"start {UNIT}"])
        self.assertEqual(self.new_log(), ["TERM", f"start {digest(GOOD, 'token-3')}"])
        self.assertEqual(self.installed(), (GOOD, "token-3"))
        new = self.entry()["main_pid"]
        self.assertNotEqual(new, old)
        self.assertEqual(self.running(), [new], "one nvidia-gridd, never two")
        self.assertEqual(self.entry()["active_state"], "active")

    def test_an_unchanged_source_restarts_nothing(self):
        pid = self.running_gridd()
        for _ in range(2):
            self.assert_runs(0, "unchanged", self.reload())
        self.assertEqual(self.new_calls(), [])
        self.assertEqual(self.new_log(), [])
        self.assertEqual(self.running(), [pid])

    def test_a_broken_rotation_is_rolled_back_then_known_bad(self):
        self.running_gridd()
        self.rotate(conf=BROKEN)
        r = self.reload()
        self.assert_runs(1, "rolled-back", r)
        good, bad = digest(GOOD, "token-2"), digest(BROKEN, "token-2")
        # The running one stopped, the broken start, and the good files' start after the rollback: the
        # daemon the broken files crashed is only started again (nothing runs, nothing to stop).
        self.assertEqual(self.new_log(), ["TERM", f"start {bad}", f"start {good}"])
        self.assertEqual(self.new_calls(), [f"stop {UNIT} signal 15", f"start {UNIT}", f"start {UNIT}"])
        self.assertEqual(self.installed(), (GOOD, "token-2"))
        self.assertEqual(self.running(), [self.entry()["main_pid"]])
        self.assertEqual(self.entry()["active_state"], "active")
        # The same broken content again: not retried until it changes.
        r = self.reload()
        self.assert_runs(0, "known-bad", r)
        self.assertIn("failed before", r.stderr)
        self.assertEqual((self.new_calls(), self.new_log()), ([], []))
        self.assertEqual(self.installed(), (GOOD, "token-2"))
        # Changed again, and good: applied.
        self.rotate(conf=GOOD2)
        self.assert_runs(0, "applied", self.reload())
        self.assertEqual(self.new_log(), ["TERM", f"start {digest(GOOD2, 'token-2')}"])

    def test_a_feature_type_the_host_holds_another_license_for_waits_for_its_reboot(self):
        """Once the driver is licensed for one FeatureType, a restart of nvidia-gridd cannot license
        another until the host restarts (nvidia-settings' ctkgridlicense.c, is_restart_required): the
        rotation is kept back, nothing restarts, run after run, and the reboot lets it through."""
        write(self.m.p("/proc/stat"), "cpu  1 2 3\nbtime 1796140000\n")
        write(self.m.p("/proc/uptime"), "5000.00 9000.00\n")
        self.running_gridd()  # FeatureType=1 applied; the stand-in runs
        state = self.m.p("/var/lib/unbounded-nvidia/license/metrics.state")
        text = open(state).read()
        # What a run records when it sees nvidia-gridd licensed (the journal, not faked here).
        write(state, text + "host_btime 1796140000\nhost_uptime 4000\nlicensed_feature 4\n", 0o600)
        self.rotate(GOOD2, "token-3")
        for n in range(2):
            r = self.reload()
            self.assert_runs(0, "reboot-required", r)
            # said once, when it begins; never again run after run
            self.assertEqual("FeatureType=2 (NVIDIA RTX Virtual Workstation)" in r.stderr, n == 0, r.stderr)
            self.assertEqual(self.new_calls(), [])
            self.assertEqual(self.new_log(), [])
            self.assertEqual(self.installed(), (GOOD, "token-2"))
        metrics = open(self.m.p(METRICS)).read()
        self.assertIn("unbounded_nvidia_license_reboot_required 1\n", metrics)
        self.assertIn('unbounded_nvidia_license_feature_type{which="held_back"} 2\n', metrics)
        write(self.m.p("/proc/stat"), "cpu  1 2 3\nbtime 1796150000\n")  # the host rebooted
        write(self.m.p("/proc/uptime"), "60.00 100.00\n")
        self.assert_runs(0, "applied", self.reload())
        self.assertEqual(self.installed(), (GOOD2, "token-3"))
        self.assertIn("unbounded_nvidia_license_reboot_required 0\n", open(self.m.p(METRICS)).read())

    def test_a_unit_that_could_be_sigkilled_is_refused(self):
        pid = self.running_gridd()
        for n, setting in enumerate(({"send_sigkill": True}, {"send_sigkill": False, "kill_signal": 9})):
            self.set_entry(**setting)
            self.rotate(token=f"token-{10 + n}")
            r = self.reload()
            self.assert_runs(1, "failed", r)
            self.assertIn("refusing to restart it", r.stderr)
            self.assertEqual(self.new_calls(), [], "no stop sent")
            self.assertEqual(self.new_log(), [])
            self.assertEqual(self.running(), [pid])
            # The files are put back: the disk matches the daemon that still runs.
            self.assertEqual(self.installed(), (GOOD, "token-2"))

    def test_this_systems_own_manager_through_the_tree_is_refused(self):
        """/run bind-mounted into the tree (as a chroot set up with --rbind does): the tree's
        run/systemd/private is then this system's PID 1, whose nvidia-gridd is not the tree's."""
        self.pid1.stop()
        self.rotate(token="token-2")
        tree = self.m.path
        script = (f"mount -t tmpfs tmpfs /run && mkdir -p /run/systemd {tree}/run/systemd && "
                  f"{{ {fixture('fake-systemd')} {self.units_file} /run/systemd/private >/dev/null 2>&1 & pid=$!; }} && "
                  "for i in $(seq 500); do [ -S /run/systemd/private ] && break; sleep 0.01; done && "
                  f"mount --bind /run/systemd {tree}/run/systemd && "
                  f"{{ {LICENSE_BIN} --root {tree}; echo \"exit $?\"; }}; kill $pid")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True,
                           timeout=60, env=self.m.run_env())
        self.assertIn("exit 1", r.stdout, r.stderr)
        self.assertIn("/run/systemd/private is this system's own service manager, not the tree's", r.stderr)
        self.assertEqual(self.new_calls(), [])
        self.assertEqual(self.installed(), (GOOD, "token-1"))

    def test_a_root_without_a_manager_socket_has_no_service_manager(self):
        self.rotate(token="token-2")
        r = self.reload(fake=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "unbounded-nvidia-license-reload: A --root run has no service manager to restart "
                                   f"{UNIT} with (no /run/systemd/private)\n")
        self.assertEqual(self.installed(), (GOOD, "token-1"))
        # Counted, as every run is (license-reload(8)): a run that failed early was counted nowhere.
        self.assertEqual(r.outcome, ["failed"])


if __name__ == "__main__":
    main()
