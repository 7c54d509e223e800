#!/usr/bin/env python3
"""unbounded-nvidia-generator: golden trees (as zram-generator and systemd's test-fstab-generator do
it), invocations, and `systemd-analyze verify` of every generated and shipped unit."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests.harness import GENERATOR, main

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "generator")
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
# Install-time paths meson compiled in, replaced by placeholders in the expected trees.
PLACEHOLDERS = {
    "@SETUP_BINARY@": os.environ.get("INSTALL_SETUP_PATH", ""),
    "@LICENSE_RELOAD_BINARY@": os.environ.get("INSTALL_LICENSE_PATH", ""),
    "@UNITDIR@": os.environ.get("INSTALL_UNITDIR", ""),
}


def to_placeholders(text):
    for k, v in PLACEHOLDERS.items():
        text = text.replace(v, k)
    return text


def from_placeholders(text):
    for k, v in PLACEHOLDERS.items():
        text = text.replace(k, v)
    return text


def copy_tree(src, dst, transform):
    """Copies files and symlinks, passing contents and link targets through `transform`."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            s, d = os.path.join(dirpath, n), os.path.join(dst, rel, n)
            if os.path.islink(s):
                os.symlink(transform(os.readlink(s)), d)
            elif n != ".empty":
                with open(s) as f, open(d, "w") as g:
                    g.write(transform(f.read()))


def run_generator(root, dirs, env=None, container=True):
    """The generator as PID 1 runs it. `container`: in an nspawn machine, as $SYSTEMD_VIRTUALIZATION
    says there; False leaves the root's /run/systemd/container to decide (the golden trees hold it)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_") and k != "SYSTEMD_VIRTUALIZATION"}
    e["UNBOUNDED_NVIDIA_ROOT"] = root
    if container:
        e["SYSTEMD_VIRTUALIZATION"] = "container:systemd-nspawn"
    e.update(env or {})
    return subprocess.run([GENERATOR, *dirs], capture_output=True, text=True, env=e)


class TestGolden(unittest.TestCase):
    def generate(self, case, single_dir=False, env=None):
        tmp = tempfile.mkdtemp(prefix="unbounded-gen-")
        self.addCleanup(shutil.rmtree, tmp, True)
        root = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(CASES, case, "input"), root, symlinks=True)
        out = os.path.join(tmp, "out")
        early, late = os.path.join(tmp, "early"), os.path.join(tmp, "late")
        for d in (out, early, late):
            os.makedirs(d)
        r = run_generator(root, [out] if single_dir else [out, early, late], env, container=False)
        self.assertEqual(os.listdir(early) + os.listdir(late), [], "wrote outside the normal directory")
        return r, out, tmp

    def check_case(self, case, rc=0, single_dir=False):
        r, out, tmp = self.generate(case, single_dir)
        self.assertEqual(r.returncode, rc, r.stderr)
        expected_dir = os.path.join(CASES, case, "expected")
        if UPDATE:
            shutil.rmtree(expected_dir, ignore_errors=True)
            os.makedirs(expected_dir)
            copy_tree(out, expected_dir, to_placeholders)
            if not os.listdir(expected_dir):
                open(os.path.join(expected_dir, ".empty"), "w").close()
        expected = os.path.join(tmp, "expected")
        copy_tree(expected_dir, expected, from_placeholders)
        d = subprocess.run(["diff", "-ru", "--no-dereference", expected, out], capture_output=True, text=True)
        self.assertEqual(d.returncode, 0, f"generator output differs from {case}/expected:\n{d.stdout}{d.stderr}")
        return r

    def test_01_gpu_machine(self):
        self.check_case("01-gpu-machine")

    def test_01_gpu_machine_single_dir_argv(self):
        self.check_case("01-gpu-machine", single_dir=True)

    def test_02_non_gpu_machine_writes_nothing(self):
        r = self.check_case("02-non-gpu")
        self.assertEqual(r.stderr, "")

    def test_03_disabled_by_config(self):
        self.check_case("03-disabled-by-config")

    def test_04_licensing_configured(self):
        self.check_case("04-licensing-configured")

    def test_05_enabled_without_gpu(self):
        self.check_case("05-enabled-without-gpu")

    def test_06_control_node_only(self):
        self.check_case("06-control-node-only")

    def test_07_licensing_switched_off(self):
        self.check_case("07-licensing-switched-off")

    def test_08_licensing_source_present(self):
        self.check_case("08-licensing-source-present")

    def test_09_bad_config_still_orders_setup_and_says_why(self):
        r = self.check_case("09-bad-config", rc=1)
        self.assertIn("/etc/unbounded/nvidia.yaml:2: unknown key 'stagin_timeout'", r.stderr)

    def test_19_a_gpu_host_is_no_container_and_gets_nothing(self):
        """The machine's package installed on a GPU host: /dev/nvidiactl is there, but PID 1 runs in no
        container, so the host's own containerd and kubelet are never ordered after our setup and
        nvidia-container-toolkit's refresh units are never masked."""
        r = self.check_case("19-gpu-host-not-a-container")
        self.assertEqual(r.stderr, "")
        r, out, _ = self.generate("19-gpu-host-not-a-container", env={"UNBOUNDED_NVIDIA_LOG_LEVEL": "debug"})
        self.assertIn("Not in a container (no /run/systemd/container and no $SYSTEMD_VIRTUALIZATION)", r.stderr)
        self.assertEqual(os.listdir(out), [])

    def test_systemd_s_virtualization_variable_decides_when_pid_1_sets_it(self):
        """systemd 251+ passes $SYSTEMD_VIRTUALIZATION to generators: "vm:kvm" on a GPU VM host is no
        container whatever a stale file says; "container:systemd-nspawn" is one without the file."""
        for case, env, generates in (("01-gpu-machine", {"SYSTEMD_VIRTUALIZATION": "vm:kvm"}, False),
                                     ("01-gpu-machine", {"SYSTEMD_VIRTUALIZATION": "container:"}, False),
                                     ("19-gpu-host-not-a-container", {"SYSTEMD_VIRTUALIZATION": "container:systemd-nspawn"}, True)):
            with self.subTest(case=case, env=env):
                r, out, _ = self.generate(case, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual("unbounded-nvidia-setup.service" in os.listdir(out), generates, os.listdir(out))

    def test_10_unit_values_escape_specifiers(self):
        """Issue 10, class 3: a configured path is written with `%` doubled, never as a specifier."""
        self.check_case("10-unit-values-escaped")
        r, out, _ = self.generate("10-unit-values-escaped")
        with open(os.path.join(out, "unbounded-nvidia-license-reload.path.d/50-unbounded-nvidia-source.conf")) as f:
            self.assertIn("PathChanged=/run/lic%%i/100%% sure\n", f.read())

    def test_11_newline_in_a_configured_path_never_reaches_unit_text(self):
        """Issue 10, class 3: `source_dir: "/run/lic\\nUnit=other.service"` must not add a Unit= line."""
        r = self.check_case("11-newline-in-config-refused", rc=1)
        self.assertIn("nvidia.yaml:2: expected an absolute path without", r.stderr)
        _, out, _ = self.generate("11-newline-in-config-refused")
        for dirpath, _, files in os.walk(out):
            for n in files:
                if not os.path.islink(os.path.join(dirpath, n)):
                    with open(os.path.join(dirpath, n)) as f:
                        self.assertNotIn("other.service", f.read(), n)

    def test_12_refresh_watches_the_staging_layout(self):
        """The refresh path unit watches the staging parent, every tree and the directories discovery
        reads in each, never through a symlink; a name that cannot be a unit value is left out."""
        r = self.check_case("12-refresh-watches-staging")
        self.assertEqual(r.stderr.count("not watching it for changes"), 0, r.stderr)
        # A staging entry named with a newline (made here: no such name is checked in).
        tmp = tempfile.mkdtemp(prefix="unbounded-gen-")
        self.addCleanup(shutil.rmtree, tmp, True)
        root = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(CASES, "12-refresh-watches-staging", "input"), root, symlinks=True)
        os.makedirs(os.path.join(root, "run/host-nvidia/4\nUnit=evil.service"))
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        r = run_generator(root, [out])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("not watching it for changes", r.stderr)
        with open(os.path.join(out, "unbounded-nvidia-refresh.path")) as f:
            self.assertNotIn("evil.service", f.read())

    def test_13_non_gpu_machine_with_our_stale_spec_cleans_it_up(self):
        """Issue 19: an image that ran on a GPU host boots on one without: our spec goes before containerd."""
        r = self.check_case("13-non-gpu-stale-spec")
        self.assertIn("/etc/cdi/nvidia.yaml was written by unbounded-nvidia-setup: unbounded-nvidia-cleanup.service removes it", r.stderr)

    def test_16_non_gpu_machine_with_our_stale_imex_spec_cleans_it_up(self):
        """Issue 12: the IMEX channel spec is ours too, and goes the same way."""
        r = self.check_case("16-non-gpu-stale-imex-spec")
        self.assertIn("/etc/cdi/nvidia-imex-channel.yaml was written by unbounded-nvidia-setup: "
                      "unbounded-nvidia-cleanup.service removes it", r.stderr)

    def test_14_a_spec_someone_else_wrote_is_never_touched(self):
        r = self.check_case("14-non-gpu-foreign-spec")
        self.assertEqual(r.stderr, "")

    def test_17_dot_entries_are_no_staging_tree(self):
        """Issue 35: one definition of an NVIDIA machine. The generator counted a staging parent holding only
        a dot-entry (an image's .keep) as an NVIDIA machine and ordered containerd after a setup that then
        found nothing to wait for (it skipped dot-entries)."""
        r = self.check_case("17-dot-entries-only")
        self.assertEqual(r.stderr, "")

    def test_15_disabled_by_config_with_our_stale_spec(self):
        self.check_case("15-disabled-with-stale-spec")

    def test_18_expected_gpus_without_binds_is_a_gpu_machine(self):
        """Issue 43: a machine configured with expected_gpus whose host bound nothing must hold
        containerd and kubelet back (setup fails until the binds come), not start as a CPU node."""
        r = self.check_case("18-expected-gpus-without-binds")
        self.assertIn("expected_gpus: 8", r.stderr)

    def test_kubelet_requires_setup_like_containerd(self):
        """Issue 43: kubeadm's kubelet.service has no Requires=containerd: it is held back itself."""
        for unit in ("containerd.service", "kubelet.service"):
            link = os.path.join(CASES, "01-gpu-machine", "expected", f"{unit}.requires", "unbounded-nvidia-setup.service")
            self.assertEqual(os.readlink(link), "../unbounded-nvidia-setup.service")

    def test_kill_switch_from_the_environment(self):
        r, out, _ = self.generate("04-licensing-configured", env={"VGPU_LICENSE_AUTO_RELOAD": "false"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "unbounded-nvidia-setup.service")))
        self.assertFalse(os.path.lexists(os.path.join(out, "multi-user.target.wants/unbounded-nvidia-license-reload.path")))
        self.assertFalse(os.path.lexists(os.path.join(out, "timers.target.wants/unbounded-nvidia-license-reload.timer")))
        self.assertTrue(os.path.lexists(os.path.join(out, "multi-user.target.wants/unbounded-nvidia-refresh.path")))

    def test_interval_from_the_environment(self):
        """A duration, as the configuration's (it was documented as seconds); a bare number is seconds."""
        for value, interval in (("90", "90s"), ("2m", "120s"), ("1m30s", "90s")):
            r, out, _ = self.generate("04-licensing-configured", env={"VGPU_LICENSE_RELOAD_INTERVAL": value})
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "unbounded-nvidia-license-reload.timer.d/50-unbounded-nvidia-interval.conf")) as f:
                self.assertIn(f"OnUnitInactiveSec={interval}\n", f.read())

    def test_a_bad_interval_knob_warns_and_keeps_rotation_on(self):
        """Issue 13: VGPU_LICENSE_RELOAD_INTERVAL=soon (PID 1's environment) must not switch rotation off."""
        for bad in ("soon", "0.5", "0"):
            r, out, _ = self.generate("04-licensing-configured", env={"VGPU_LICENSE_RELOAD_INTERVAL": bad})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"Ignoring VGPU_LICENSE_RELOAD_INTERVAL='{bad}': not a duration of at least 1s; using", r.stderr)
            self.assertNotIn("setup will report", r.stderr)
            self.assertTrue(os.path.lexists(os.path.join(out, "timers.target.wants/unbounded-nvidia-license-reload.timer")))
            with open(os.path.join(out, "unbounded-nvidia-license-reload.timer.d/50-unbounded-nvidia-interval.conf")) as f:
                self.assertIn("OnUnitInactiveSec=45s", f.read())  # the config file's reload_interval

    def test_the_environment_file_sets_the_timer_and_the_kill_switch(self):
        """/etc/default/unbounded-nvidia-license-reload is the service's EnvironmentFile=: the generator
        reads it too, so the timer ticks at the interval the service is told, and it wins over PID 1's."""
        tmp = tempfile.mkdtemp(prefix="unbounded-gen-")
        self.addCleanup(shutil.rmtree, tmp, True)
        root = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(CASES, "04-licensing-configured", "input"), root, symlinks=True)
        default = os.path.join(root, "etc/default/unbounded-nvidia-license-reload")
        os.makedirs(os.path.dirname(default), exist_ok=True)
        for text, env, interval in (("VGPU_LICENSE_RELOAD_INTERVAL=120\n", {"VGPU_LICENSE_RELOAD_INTERVAL": "90"}, "120s"),
                                    ("# only a comment\n", {"VGPU_LICENSE_RELOAD_INTERVAL": "90"}, "90s")):
            with open(default, "w") as f:
                f.write(text)
            out = os.path.join(tmp, "out-" + interval)
            os.makedirs(out)
            r = run_generator(root, [out], env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "unbounded-nvidia-license-reload.timer.d/50-unbounded-nvidia-interval.conf")) as f:
                self.assertIn(f"OnUnitInactiveSec={interval}", f.read())
        with open(default, "w") as f:
            f.write('VGPU_LICENSE_AUTO_RELOAD="false"\n')
        out = os.path.join(tmp, "out-off")
        os.makedirs(out)
        self.assertEqual(run_generator(root, [out]).returncode, 0)
        self.assertFalse(os.path.lexists(os.path.join(out, "timers.target.wants/unbounded-nvidia-license-reload.timer")))


class TestInvocation(unittest.TestCase):
    def test_argument_counts(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        for args in ([], [tmp, tmp], [tmp, tmp, tmp, tmp]):
            r = run_generator(tmp, args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("Usage:", r.stderr)

    def test_unwritable_output_is_a_runtime_error(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        shutil.copytree(os.path.join(CASES, "01-gpu-machine", "input"), os.path.join(tmp, "root"))
        open(os.path.join(tmp, "file"), "w").close()
        r = run_generator(os.path.join(tmp, "root"), [os.path.join(tmp, "file", "out")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("Failed to create", r.stderr)

    def test_existing_output_is_not_overwritten(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        shutil.copytree(os.path.join(CASES, "01-gpu-machine", "input"), os.path.join(tmp, "root"))
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        open(os.path.join(out, "unbounded-nvidia-setup.service"), "w").close()
        r = run_generator(os.path.join(tmp, "root"), [out])
        self.assertEqual(r.returncode, 1)
        self.assertIn("duplicate entry?", r.stderr)


CONSUMERS_BIN = os.environ.get("CONSUMERS_BIN")
CONSUMERS_UNIT = "unbounded-nvidia-consumers.service"


def analysis_root(testcase, case="04-licensing-configured"):
    """A root for systemd-analyze: the distribution's units, ours as installed (meson's unit dir), stand-in
    containerd, kubelet and nvidia-gridd, our binaries where the units name them, and the generator's
    output for `case` in /run/systemd/generator. Returns (root, env, generator output dir)."""
    vroot = tempfile.mkdtemp(prefix="unbounded-analyze-")
    testcase.addCleanup(shutil.rmtree, vroot, True)
    sysunits = os.path.join(vroot, "usr/lib/systemd/system")
    shutil.copytree("/lib/systemd/system", sysunits, symlinks=True)
    unitdir = os.path.join(vroot, PLACEHOLDERS["@UNITDIR@"].lstrip("/"))
    os.makedirs(unitdir, exist_ok=True)
    src, build = os.environ["UNITS_SOURCE_DIR"], os.environ["UNITS_BUILD_DIR"]
    for n in ("unbounded-nvidia-license-reload.path", "unbounded-nvidia-license-reload.timer"):
        shutil.copy(os.path.join(src, n), unitdir)
    for n in ("unbounded-nvidia-license-reload.service", "unbounded-nvidia-license-install.service"):
        shutil.copy(os.path.join(build, n), unitdir)
    binaries = [(PLACEHOLDERS["@SETUP_BINARY@"], os.environ["SETUP_BIN"]),
                (PLACEHOLDERS["@LICENSE_RELOAD_BINARY@"], os.environ["LICENSE_BIN"]), ("/bin/true", "/bin/true")]
    if CONSUMERS_BIN:  # built where gRPC and the CRI's api.proto were found (make's build: always)
        shutil.copy(os.path.join(build, CONSUMERS_UNIT), unitdir)
        binaries.append((os.path.join(os.path.dirname(PLACEHOLDERS["@LICENSE_RELOAD_BINARY@"]), "unbounded-nvidia-consumers"),
                         CONSUMERS_BIN))
    os.makedirs(os.path.join(unitdir, "nvidia-gridd.service.d"), exist_ok=True)
    shutil.copy(os.path.join(src, "nvidia-gridd.service.d/50-unbounded-nvidia.conf"),
                os.path.join(unitdir, "nvidia-gridd.service.d"))
    etc = os.path.join(vroot, "etc/systemd/system")
    os.makedirs(etc)
    for unit, kind in (("containerd.service", "notify"), ("kubelet.service", "simple"),
                       ("nvidia-gridd.service", "forking")):
        with open(os.path.join(etc, unit), "w") as f:
            f.write(f"[Unit]\nDescription=stand-in {unit}\n\n[Service]\nType={kind}\nExecStart=/bin/true\n")
    for binary, built in binaries:
        dest = os.path.join(vroot, binary.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(built, dest)

    machine = os.path.join(vroot, "machine")
    shutil.copytree(os.path.join(CASES, case, "input"), machine)
    gen = os.path.join(vroot, "run/systemd/generator")
    os.makedirs(gen)
    r = run_generator(machine, [gen])
    testcase.assertEqual(r.returncode, 0, r.stderr)
    env = dict(os.environ)
    env["SYSTEMD_UNIT_PATH"] = ":".join(["/etc/systemd/system", "/run/systemd/generator",
                                         PLACEHOLDERS["@UNITDIR@"], "/usr/lib/systemd/system"])
    return vroot, env, gen


class TestSystemdAnalyzeVerify(unittest.TestCase):
    """Every generated and shipped unit passes `systemd-analyze verify` with no output at all (252 only
    warns, exit 0, on an unknown key), against stand-in containerd, kubelet and nvidia-gridd units."""

    def test_generated_and_shipped_units_verify_cleanly(self):
        analyze = shutil.which("systemd-analyze")
        self.assertIsNotNone(analyze, "systemd-analyze is required (Debian package systemd)")
        vroot, env, gen = analysis_root(self)
        units = ["unbounded-nvidia-setup.service", "containerd.service", "kubelet.service", "nvidia-gridd.service",
                 "unbounded-nvidia-license-reload.service", "unbounded-nvidia-license-reload.path",
                 "unbounded-nvidia-license-reload.timer", "unbounded-nvidia-license-install.service",
                 "unbounded-nvidia-refresh.service", "unbounded-nvidia-refresh.path", "unbounded-nvidia-refresh.timer"]
        units += [CONSUMERS_UNIT] if CONSUMERS_BIN else []
        v = subprocess.run([analyze, "verify", "--man=no", f"--root={vroot}", *units],
                           capture_output=True, text=True, env=env)
        self.assertEqual((v.returncode, v.stdout + v.stderr), (0, ""), "systemd-analyze verify complained")
        # And it would complain: a unit with an unknown key makes output (the test can fail).
        with open(os.path.join(gen, "containerd.service.d", "99-typo.conf"), "w") as f:
            f.write("[Unit]\nAfterr=nothing.service\n")
        v = subprocess.run([analyze, "verify", "--man=no", f"--root={vroot}", "containerd.service"],
                           capture_output=True, text=True, env=env)
        self.assertIn("Unknown key", v.stdout + v.stderr)


class TestSystemdAnalyzeSecurity(unittest.TestCase):
    """Issue 17: `systemd-analyze security --offline=yes` of every service we generate or enable, with
    its drop-ins, at or below its target (systemd's own daemons score 2.3 to 4.3 on the same machine)."""

    TARGETS = {"unbounded-nvidia-setup.service": 3.0, "unbounded-nvidia-refresh.service": 3.0,
               "unbounded-nvidia-license-reload.service": 4.5, "unbounded-nvidia-license-install.service": 4.5}
    if os.environ.get("CONSUMERS_BIN"):
        TARGETS["unbounded-nvidia-consumers.service"] = 4.5

    def exposure(self, analyze, vroot, env, unit):
        r = subprocess.run([analyze, "security", "--offline=yes", f"--root={vroot}", "--no-pager", unit],
                           capture_output=True, text=True, env=env)
        m = re.search(r"Overall exposure level for " + re.escape(unit) + r": (\d+\.\d+)", r.stdout + r.stderr)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        return float(m.group(1)), r.stdout

    def test_every_service_is_at_or_below_its_target(self):
        analyze = shutil.which("systemd-analyze")
        self.assertIsNotNone(analyze, "systemd-analyze is required (Debian package systemd)")
        for case in ("04-licensing-configured", "10-unit-values-escaped"):
            vroot, env, _ = analysis_root(self, case)
            for unit, target in self.TARGETS.items():
                score, table = self.exposure(analyze, vroot, env, unit)
                self.assertLessEqual(score, target, f"{case}: {unit} scores {score}:\n{table}")
            # The measure can fail: an unsandboxed root service scores far above any target.
            score, _ = self.exposure(analyze, vroot, env, "containerd.service")
            self.assertGreater(score, 9.0)
        # Issue 26, item 12: the shipped license units alone, started without the generator's drop-ins
        # (a machine whose generator did not run), scored 9.6; the fixed half of the sandbox is theirs.
        vroot, env, gen = analysis_root(self, "04-licensing-configured")
        shutil.rmtree(gen)
        os.makedirs(gen)
        for unit in ("unbounded-nvidia-license-reload.service", "unbounded-nvidia-license-install.service"):
            score, table = self.exposure(analyze, vroot, env, unit)
            self.assertLessEqual(score, 3.0, f"{unit} without drop-ins scores {score}:\n{table}")
        # The cleanup oneshot of a machine that stopped being a GPU machine.
        vroot, env, _ = analysis_root(self, "13-non-gpu-stale-spec")
        score, table = self.exposure(analyze, vroot, env, "unbounded-nvidia-cleanup.service")
        self.assertLessEqual(score, 3.0, table)
        v = subprocess.run([analyze, "verify", "--man=no", f"--root={vroot}", "unbounded-nvidia-cleanup.service"],
                           capture_output=True, text=True, env=env)
        self.assertEqual((v.returncode, v.stdout + v.stderr), (0, ""), "systemd-analyze verify complained")


if __name__ == "__main__":
    main()
