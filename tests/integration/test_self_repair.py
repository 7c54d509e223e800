#!/usr/bin/env python3
"""Issue 43: a failed boot is never permanent, and health signals never lie. Fake machine roots under
--root, with the service manager the tests' PID 1 on the root's private socket (fake_systemd.py):
setup --boot retrying while the host is not ready, the units its failure held back recorded and started
by the refresh that finds the root ready (never one an operator stopped, never in a loop), verify
reading containerd's and kubelet's states, a configured GPU machine without binds, and a configuration
error that still has an outcome."""

import json
import os
import pty
import select
import subprocess
import threading
import time
import unittest

from unbounded_tests.fake_systemd import FakeSystemd
from unbounded_tests.harness import V1, V2, MachineRoot, main, write

QUICK = "refresh:\n  settle_time: 0s\n"
HELD_BACK = "/run/unbounded-nvidia/held-back.json"


class SelfRepairCase(unittest.TestCase):
    def machine(self, config=QUICK, staged=V2, module=V1):
        """A machine whose host staged `staged` while the kernel module is `module` (a host whose
        module is still building after a kernel update, or mid-upgrade)."""
        m = MachineRoot(self).standard(staged)
        m.set_proc_version(module)
        m.config(config)
        self.units_file = m.path + "-units.json"  # beside the root, as PID 1 is outside the machine's files
        self.addCleanup(lambda: os.path.exists(self.units_file) and os.unlink(self.units_file))
        self.pid1 = FakeSystemd(m.path, self.units_file)
        self.addCleanup(self.pid1.stop)
        return m

    def units(self, **states):
        """The service manager's units: name -> dict (load_state, active_state, job_type, ...); the
        manager listens in the root from then on."""
        with open(self.units_file, "w") as f:
            json.dump({"units": states, "calls": []}, f)
        self.pid1.start()

    def manager(self):
        with open(self.units_file) as f:
            return json.load(f)

    def boot_waiting(self):
        """containerd and kubelet as systemd has them while the boot's setup runs: start jobs waiting."""
        self.units(**{u: {"active_state": "inactive", "job_type": "start"} for u in ("containerd.service", "kubelet.service")})

    def cmd(self, m, *args):
        r = m.run("--json", *args)
        r.result = json.loads(r.stdout) if r.stdout.strip() else None
        return r

    def starts(self):
        return [c for c in self.manager()["calls"] if c.startswith("start ")]


class TestBootRetry(SelfRepairCase):
    def test_a_module_that_loads_late_never_fails_the_boot(self):
        m = self.machine(config=QUICK + "staging_timeout: 20s\n")
        self.boot_waiting()
        fixed = threading.Timer(1.5, m.set_proc_version, [V2])  # the module of the staged driver, loaded late
        fixed.start()
        self.addCleanup(fixed.cancel)
        r = self.cmd(m, "setup", "--boot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "ready")
        self.assertIn("not ready yet", r.stderr)
        self.assertIn("trying again", r.stderr)
        self.assertNotIn("Setup failed", r.stderr)
        self.assertFalse(os.path.exists(m.p(HELD_BACK)))

    def test_without_boot_setup_answers_at_once(self):
        m = self.machine(config=QUICK + "staging_timeout: 20s\n")
        start = time.monotonic()
        r = self.cmd(m, "setup")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertNotIn("trying again", r.stderr)

    def test_a_host_that_stays_unready_gives_one_failure_line_after_staging_timeout(self):
        m = self.machine(config=QUICK + "staging_timeout: 2s\n")
        self.boot_waiting()
        start = time.monotonic()
        r = self.cmd(m, "setup", "--boot")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 1.0)
        self.assertEqual(r.stderr.count("Setup failed:"), 1, r.stderr)
        self.assertEqual(r.result["outcome"], "failed")


class TestHeldBack(SelfRepairCase):
    def failed_boot(self):
        m = self.machine(config=QUICK + "staging_timeout: 1s\n")
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"), exist_ok=True)
        self.boot_waiting()
        r = self.cmd(m, "setup", "--boot")
        self.assertEqual(r.returncode, 1, r.stderr)
        return m, r

    def test_a_failed_boot_records_what_waited_for_it(self):
        m, r = self.failed_boot()
        self.assertEqual(r.result["held_back"], ["containerd.service", "kubelet.service"])
        with open(m.p(HELD_BACK)) as f:
            self.assertEqual(json.load(f)["units"], ["containerd.service", "kubelet.service"])
        self.assertIn("a refresh that finds the driver ready starts them", r.stderr)
        self.assertEqual(self.starts(), [])
        # the fleet's query for nodes held back (README.md, "Fleet queries")
        prom = open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")).read()
        self.assertIn("unbounded_nvidia_held_back_units 2\n", prom)

    def test_verify_names_the_held_back_units_and_what_starts_them(self):
        m, _ = self.failed_boot()
        m.set_proc_version(V2)  # the host is ready now; no refresh has run yet
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service")})
        r = self.cmd(m, "verify")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(r.result["ready"])
        paths = [p["path"] for p in r.result["problems"]]
        self.assertIn("containerd.service", paths)
        self.assertIn("kubelet.service", paths)
        msg = next(p["message"] for p in r.result["problems"] if p["path"] == "containerd.service")
        self.assertIn("inactive", msg)
        self.assertIn("held it back", msg)
        self.assertIn("unbounded-nvidia-refresh", msg)

    def test_a_refresh_that_finds_the_root_ready_starts_them_in_order(self):
        m, _ = self.failed_boot()
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service")})
        m.set_proc_version(V2)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.starts(), ["start containerd.service", "start kubelet.service"])
        self.assertEqual(r.result["started_after_failed_boot"], ["containerd.service", "kubelet.service"])
        self.assertIn("which the failed boot setup had held back", r.stderr)
        self.assertFalse(os.path.exists(m.p(HELD_BACK)))
        status = json.load(open(m.p("/run/unbounded-nvidia/status.json")))
        self.assertEqual(status["started_after_failed_boot"], ["containerd.service", "kubelet.service"])
        prom = open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")).read()
        self.assertIn("unbounded_nvidia_held_back_units 0\n", prom)
        # Ready now, and the next refresh starts nothing again.
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.result["units"], {"containerd.service": "active", "kubelet.service": "active"})
        self.cmd(m, "refresh")
        self.assertEqual(len(self.starts()), 2)

    def test_a_host_that_never_becomes_ready_starts_nothing_and_says_so_once_per_refresh(self):
        m, _ = self.failed_boot()
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service")})
        for _ in range(3):
            r = self.cmd(m, "refresh")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr.count("Refresh failed, the machine keeps what it had:"), 1, r.stderr)
            self.assertNotIn("Setup failed", r.stderr)
        self.assertEqual(self.starts(), [])
        self.assertTrue(os.path.exists(m.p(HELD_BACK)))
        self.assertFalse(self.cmd(m, "verify").result["ready"])

    def test_a_unit_that_ran_since_the_record_is_left_alone(self):
        m, _ = self.failed_boot()
        later = int(time.time() * 1e6) + 10_000_000  # started by hand after the failed boot, then stopped
        self.units(**{"containerd.service": {"active_state": "inactive", "active_enter_usec": later},
                      "kubelet.service": {"active_state": "inactive"}})
        m.set_proc_version(V2)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.starts(), ["start kubelet.service"])
        self.assertIn("leaving it stopped", r.stderr)

    def test_running_units_are_never_restarted(self):
        m, _ = self.failed_boot()
        self.units(**{u: {"active_state": "active"} for u in ("containerd.service", "kubelet.service")})
        m.set_proc_version(V2)
        self.assertEqual(self.cmd(m, "refresh").returncode, 0)
        self.assertEqual(self.starts(), [])

    def test_a_forged_record_names_nothing_but_our_units(self):
        m, _ = self.failed_boot()
        with open(m.p(HELD_BACK), "w") as f:
            json.dump({"units": ["evil.service", "containerd.service"], "recorded_usec": 1}, f)
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service", "evil.service")})
        m.set_proc_version(V2)
        self.assertEqual(self.cmd(m, "refresh").returncode, 0)
        self.assertEqual(self.starts(), ["start containerd.service"])

    def test_a_record_of_a_newer_release_is_refused_saying_so(self):
        """A machine rolled back to this release keeps what the newer one wrote in /run: a record of a
        format it does not know is not guessed at."""
        m, r = self.failed_boot()
        with open(m.p(HELD_BACK)) as f:
            self.assertEqual(json.load(f)["format"], 1)
        with open(m.p(HELD_BACK), "w") as f:
            json.dump({"format": 2, "units": ["containerd.service"], "recorded_usec": 1}, f)
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service")})
        m.set_proc_version(V2)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("held-back.json was written by a newer release (state format 2; this release reads 1), not starting", r.stderr)
        self.assertEqual(self.starts(), [])

    def test_a_successful_boot_setup_voids_an_old_record(self):
        m, _ = self.failed_boot()
        m.set_proc_version(V2)
        self.boot_waiting()
        self.assertEqual(self.cmd(m, "setup", "--boot").returncode, 0)
        self.assertFalse(os.path.exists(m.p(HELD_BACK)))


class TestConfigurationErrorHeals(SelfRepairCase):
    """A typo in the image's nvidia.yaml fails the boot's setup: containerd and kubelet are held back the
    same way as by a host that is not ready (recorded), and the first refresh after the file is fixed
    starts them, with nobody logging in."""

    def test_a_boot_that_failed_on_its_configuration_heals_once_the_file_is_fixed(self):
        m = self.machine(staged=V1)
        m.config(QUICK + "stagin_timeout: 1s\n")
        self.boot_waiting()
        r = self.cmd(m, "setup", "--boot")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown key 'stagin_timeout'", r.stderr)
        self.assertEqual(r.result["held_back"], ["containerd.service", "kubelet.service"])
        with open(m.p(HELD_BACK)) as f:
            self.assertEqual(json.load(f)["units"], ["containerd.service", "kubelet.service"])
        self.units(**{u: {"active_state": "inactive"} for u in ("containerd.service", "kubelet.service")})
        # Still broken: verify names the error; a refresh starts nothing.
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 2, v.stderr)
        self.assertIn("stagin_timeout", v.stderr)
        self.assertNotEqual(self.cmd(m, "refresh").returncode, 0)
        self.assertEqual(self.starts(), [])
        # Fixed: verify says what held them back (never "stopped on purpose?"), the refresh starts them.
        m.config(QUICK + "staging_timeout: 1s\n")
        v = self.cmd(m, "verify")
        msg = " ".join(p["message"] for p in v.result["problems"])
        self.assertIn("held it back", msg)
        self.assertNotIn("stopped on purpose", msg)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.starts(), ["start containerd.service", "start kubelet.service"])
        self.assertFalse(os.path.exists(m.p(HELD_BACK)))


class TestOperatorStopped(SelfRepairCase):
    def test_a_containerd_stopped_on_purpose_stays_stopped_and_verify_says_so(self):
        m = self.machine(staged=V1)
        self.units(**{"containerd.service": {"active_state": "inactive", "active_enter_usec": 5},
                      "kubelet.service": {"active_state": "active"}})
        self.assertEqual(self.cmd(m, "setup", "--boot").returncode, 0)
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.starts(), [])
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 1, v.stderr)
        self.assertEqual(v.result["outcome"], "not-ready")
        msg = [p["message"] for p in v.result["problems"] if p["path"] == "containerd.service"]
        self.assertEqual(len(msg), 1, v.result["problems"])
        self.assertIn("nothing will start it", msg[0])

    def test_kubelet_not_installed_is_no_problem(self):
        m = self.machine(staged=V1)
        self.units(**{"containerd.service": {"active_state": "active"}})
        self.assertEqual(self.cmd(m, "setup").returncode, 0)
        v = self.cmd(m, "verify")
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.result["units"]["kubelet.service"], "not installed")

    def test_a_root_tree_without_a_manager_is_not_judged_on_units(self):
        m = self.machine(staged=V1)
        self.assertEqual(m.setup().returncode, 0)
        r = m.run("--json", "verify")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--root", json.loads(r.stdout)["units"])


class TestConfiguredGpuMachine(SelfRepairCase):
    """Item 4: enabled: true or expected_gpus with nothing bound is broken, never a CPU node."""

    def bare(self, config):
        m = MachineRoot(self)
        m.config(config)
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))
        return m

    def test_expected_gpus_without_binds_fails_setup_and_verify(self):
        for config in ("expected_gpus: 8\n", "enabled: true\n"):
            if True:  # each configuration on its own root
                m = self.bare(config + "staging_timeout: 200ms\n")
                r = m.setup()
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.result["outcome"], "failed")
                self.assertIn("the host has not bound its NVIDIA driver", r.result["error"])
                self.assertIn(config.split(":")[0], r.result["error"])
                v = m.run("--json", "verify")
                self.assertEqual(v.returncode, 1, v.stderr)
                self.assertEqual(json.loads(v.stdout)["outcome"], "staging-gone")
                npd = m.run("verify", "--npd=staging-gone")
                self.assertEqual(npd.returncode, 1, npd.stdout)
                prom = open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")).read()
                self.assertIn("unbounded_nvidia_ready 0\n", prom)

    def test_cleanup_on_it_keeps_nothing_stale_but_says_why(self):
        m = MachineRoot(self).standard(V1)
        self.assertEqual(m.setup().returncode, 0)
        # The machine restarts on a host that bound nothing: /run is new, the spec of ours names a
        # root that is gone.
        m.clear_staging()
        for p in ("/run/nvidia", "/run/unbounded-nvidia", "/dev/nvidiactl"):
            path = m.p(p)
            subprocess.run(["rm", "-rf", path], check=True)
        m.config("expected_gpus: 1\n")
        r = m.run("--json", "cleanup")
        self.assertEqual(r.returncode, 1, r.stderr)
        result = json.loads(r.stdout)
        self.assertEqual(result["outcome"], "staging-gone")
        self.assertTrue(result["cdi_spec_removed"])
        self.assertFalse(os.path.exists(m.p("/etc/cdi/nvidia.yaml")))
        self.assertIn("expected_gpus: 1", r.stderr)
        self.assertIn("its stale CDI specs are removed", r.stderr)

    def test_a_machine_configured_nothing_stays_a_cpu_node(self):
        m = self.bare("staging_timeout: 200ms\n")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "no-gpu")


class TestEveryRunHasAnOutcome(SelfRepairCase):
    """Item 5: a configuration error is a failed run in the JSON, status.json, the metrics, the journal."""

    def test_a_configuration_error_is_outcome_failed_everywhere(self):
        m = MachineRoot(self).standard(V1)
        m.config("staging_timeout: soon\n")
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))
        for command in ("setup", "refresh"):
            if True:  # both commands that record
                r = m.run("--json", command)
                self.assertEqual(r.returncode, 2, r.stderr)
                result = json.loads(r.stdout)
                self.assertEqual(result["outcome"], "failed")
                self.assertIn("nvidia.yaml:1", result["error"])
                status = json.load(open(m.p("/run/unbounded-nvidia/status.json")))
                self.assertEqual((status["command"], status["outcome"]), (command, "failed"))
                prom = open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")).read()
                self.assertIn(f'unbounded_nvidia_outcome_info{{command="{command}",outcome="failed"}} 1\n', prom)
                self.assertEqual(len([l for l in r.stderr.splitlines() if l.strip()]), 1, r.stderr)
        v = m.run("--json", "verify")
        self.assertEqual(v.returncode, 2)
        self.assertEqual(json.loads(v.stdout)["outcome"], "failed")


class TestCountedAndAlerted(SelfRepairCase):
    """Item 7: what makes pods fail counts in the metrics, whatever root the run serves."""

    def prom(self, m):
        return open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")).read()

    def test_containerd_with_cdi_off_counts_as_a_warning_of_setup(self):
        m = self.machine(staged=V1)
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))
        write(m.p("/var/lib/dpkg/status"), "Package: containerd\nStatus: install ok installed\nVersion: 1.7.24~ds1-6\n\n")
        m.install_containerd("1.7.24")
        write(m.p("/etc/containerd/config.toml"), 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n')
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        cdi_off = [w for w in r.result["warnings"] if "enable_cdi" in w]
        self.assertEqual(len(cdi_off), 1, r.result["warnings"])
        self.assertIn(f"unbounded_nvidia_warnings {len(r.result['warnings'])}\n", self.prom(m))
        self.assertIn('unbounded_nvidia_consumer_findings{check="cdi-disabled"} 1\n', self.prom(m))

    def test_a_kept_root_reports_the_spec_it_keeps(self):
        m = self.machine(staged=V1)
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))
        self.assertEqual(m.setup().returncode, 0)
        m.clear_staging()
        m.stage_all(V2)  # the host staged V2; the module still runs V1: pending-host-reboot
        r = self.cmd(m, "refresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "pending-host-reboot")
        self.assertGreater(r.result["cdi_devices"], 0)
        self.assertIn(f"unbounded_nvidia_cdi_devices {r.result['cdi_devices']}\n", self.prom(m))
        self.assertIn("cdi_version", r.result)


class TestHostCommandsParse(SelfRepairCase):
    """Item 9: `machinectl shell <m> ... verify --json` runs on a pty, where stdout and stderr are one
    terminal: nothing but the JSON may reach it, in every mode (ready, not ready, a bad config)."""

    def on_pty(self, m, *args):
        """Runs the binary with stdin, stdout and stderr on one pty, as machinectl shell does; returns
        (exit status, everything the terminal got)."""
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        p = subprocess.Popen([os.environ["SETUP_BIN"], "--root", m.path, *args], stdin=slave, stdout=slave, stderr=slave,
                             env=m.run_env())
        os.close(slave)
        out = b""
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        return p.wait(timeout=30), out.decode().replace("\r\n", "\n")

    def test_verify_json_on_a_terminal_is_only_the_json(self):
        m = self.machine(staged=V1)
        self.units(**{u: {"active_state": "active"} for u in ("containerd.service", "kubelet.service")})
        self.assertEqual(self.cmd(m, "setup").returncode, 0)
        rc, out = self.on_pty(m, "verify", "--json")
        self.assertEqual(rc, 0, out)
        self.assertTrue(json.loads(out)["ready"], out)
        # Not ready: the problems are in the object, and no log line beside it.
        self.units(**{"containerd.service": {"active_state": "inactive"}})
        rc, out = self.on_pty(m, "verify", "--json")
        self.assertEqual(rc, 1, out)
        self.assertEqual(json.loads(out)["problems"][0]["path"], "containerd.service")
        # A configuration error: still one object.
        m.config("staging_timeout: soon\n")
        rc, out = self.on_pty(m, "verify", "--json")
        self.assertEqual(rc, 2, out)
        self.assertEqual(json.loads(out)["outcome"], "failed")

    def test_npd_on_a_terminal_is_one_line(self):
        m = self.machine(staged=V1)
        self.units(**{"containerd.service": {"active_state": "inactive"}})
        self.assertEqual(self.cmd(m, "setup").returncode, 0)
        rc, out = self.on_pty(m, "verify", "--npd")
        self.assertEqual(rc, 1, out)
        self.assertEqual(len(out.strip().splitlines()), 1, out)
        self.assertTrue(out.startswith("not-ready: containerd.service is inactive"), out)


if __name__ == "__main__":
    main()
