#!/usr/bin/env python3
"""Issue 47: a fleet's day in sequences. A hypothesis RuleBasedStateMachine drives the real binaries on a
fake machine root through host events (a driver staged, half-upgraded or unbound, another kernel module,
GPUs coming and going) and machine actions (setup, refresh, verify, each also SIGKILLed at a drawn
system call), and after every step checks what must hold whatever the order:

  root      the driver root is one complete tree as its manifest says (old or new, never mixed)
  spec      every hostPath of our spec exists, and the spec serves the root's version
  truthful  verify exits 0 only when pods can work: the root is the loaded module's version, the spec
            offers exactly the GPUs the machine has, every hostPath exists
  live      setup and an unkilled refresh succeed, and verify is ready, when the host staged the module's
            version completely and a GPU is there
  clean     a successful run leaves no temporary tree or spec behind
  untouched nothing outside our own paths changed (staging, /proc, /dev)

A failure shrinks to the shortest sequence; hypothesis prints it as a story of steps, and it is kept in
tests/stateful/examples/ (the example database, in the repository: every run replays what failed
before). STATEFUL_SEED picks the seed (printed each run); without it, make check and CI draw from the
fixed CHECK_SEED, so a failure there is the same on every run and never a commit's bad luck on a
defect it did not touch; STATEFUL_EXAMPLES and STATEFUL_STEPS the budget;
STATEFUL_MINUTES runs fresh seeds until the time is up (make soak)."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import unittest

import yaml

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from unbounded_tests.fake_systemd import FakeSystemd
from unbounded_tests.harness import (ARCH, IS_ROOT, PLUGIN_SPEC, SETUP, V1, V2, MachineRoot, fixture, main, make_chardev,
                                     plugin_spec, preload_env, snapshot, write)

HERE = os.path.dirname(os.path.abspath(__file__))
STATS = {"sequences": 0, "steps": 0, "runs": 0, "ready": 0, "live": 0, "license runs": 0, "gridd starts": 0}
EXAMPLES = os.environ.get("STATEFUL_DATABASE") or os.path.join(HERE, "examples")
VERSIONS = (V1, V2)
MINORS = range(3)
SPEC = "/etc/cdi/nvidia.yaml"
# A deliberately broken build (tests/README.md): "verify-ignores-module" runs verify with the kernel
# module's version hidden from it (tests/fixtures/hide_module_shim.cpp).
BROKEN = os.environ.get("STATEFUL_BROKEN", "")


# Where a run may be killed: any system call early, or the calls of the copy, the swap and the spec's
# write late in the run (inject=all alone would only ever stop the first few dozen calls).
# A third of the runs is killed: the others are what shows a fleet's machines coming back.
# sendmsg: the programs' D-Bus calls to the service manager (a license reload makes about 60: each
# look at nvidia-gridd's unit is eight), so a run dies between its stop job and its start job too.
KILLS = st.one_of(st.none(), st.none(), st.tuples(st.just("all"), st.integers(min_value=1, max_value=40)) | st.tuples(
    st.sampled_from(["copy_file_range,sendfile,write", "fsync,fdatasync,syncfs", "renameat2,renameat,rename", "unlinkat,rmdir",
                     "symlinkat,linkat,mkdirat"]),
    st.integers(min_value=1, max_value=12)) | st.tuples(st.just("sendmsg"), st.integers(min_value=1, max_value=64)))


def uuid(minor):
    return f"GPU-{minor:08x}-1111-2222-3333-444455556666"


def bus(minor):
    return f"0000:{0x18 + minor:02x}:00.0"


# The specs setup writes (the IMEX, NVSwitch, GDRCopy and GDS ones beside the main one).
OUR_SPECS = ("/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia-imex-channel.yaml", "/etc/cdi/nvidia-nvswitch.yaml",
             "/etc/cdi/nvidia-gdrcopy.yaml", "/etc/cdi/nvidia-gds.yaml")
IMEX_SPEC = OUR_SPECS[1]
DAEMONS = {"persistenced": "/run/nvidia-persistenced/socket", "fabricmanager": "/run/nvidia-fabricmanager/socket"}
METRICS = "/var/lib/prometheus/node-exporter"
STATUS = "/run/unbounded-nvidia/status.json"
# Another tenant's file in the machine's /run (a GPU operator leaves its validations in /run/nvidia),
# which a full /run is full of here.
FILLER = "/run/nvidia/validations/filler"
# Run in a private mount namespace (main() makes one when root): the machine's /run can be a small tmpfs.
IN_PRIVATE_MOUNTS = os.environ.get("STATEFUL_PRIVATE_MOUNTS") == "1"
RUN_SIZE_KIB = 4096
LICENSE_BIN = os.environ.get("LICENSE_BIN", "")
GRIDD_UNIT = "nvidia-gridd.service"
LICENSING = "/run/host-nvidia-licensing"
GRIDD_CONF = "/etc/nvidia/gridd.conf"
TOKEN = "/etc/nvidia/ClientConfigToken/client_configuration_token.tok"
# Licensing contents: a gridd.conf and a token that say their name; "broken" a gridd.conf nvidia-gridd
# does not stay up with.
LICENSES = ("A", "B", "C", "broken")
# A stand-in nvidia-gridd (tests/integration/test_license_reload.py's): reads the installed files at its
# start only, logs the start with their content's name, exits at once on a broken gridd.conf (shell
# builtins only: it must be gone within the reloader's settle time however loaded the machine), logs
# the SIGTERM that stops it.
GRIDD = """#!/bin/sh
read -r first < {conf}
read -r token < {token}
case "$first" in *BROKEN*) echo "start broken/$token" >> {log}; exit 1 ;; esac
echo "start $(sed -n 's/^# license //p' {conf})/$token" >> {log}
trap 'echo TERM >> {log}; kill $! 2>/dev/null; exit 0' TERM
sleep 1000 &
wait
"""
CRI_17 = '[plugins."io.containerd.grpc.v1.cri"]'
# containerd as a node may have it: not installed, 1.7 with CDI off (its default) or on, 2.1 (on by default).
CONTAINERD = {"none": None, "1.7-cdi-off": ("1.7.24~ds1-6", None),
              "1.7-cdi-on": ("1.7.24~ds1-6", f"version = 2\n{CRI_17}\n  enable_cdi = true\n"), "2.1": ("2.1.9+ds1-5", None)}
# Specs someone else leaves in /var/run/cdi: one that shadows ours (nvidia-cdi-refresh's, defining
# nvidia.com/gpu=all and =0), a second spec of our kind that meets none of our names (pods still get
# ours; verify says not ready all the same), the device plugin's.
FOREIGN = ("none", "shadowing", "second", "device-plugin")


def reap():
    """The stand-in nvidia-gridds the fake manager started (detached: this process is their
    subreaper) that have exited."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def become_subreaper():
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def gpu_spec(devices):
    return json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
                       "devices": [{"name": d, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}} for d in devices]})


def dpkg_status(version):
    return f"Package: containerd\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\nDescription: daemon\n"


def spec_doc(path):
    with open(path) as f:
        return yaml.safe_load(f)


def edits(doc):
    """Every containerEdits of a spec: the spec's own and each device's."""
    yield doc.get("containerEdits") or {}
    for d in doc.get("devices") or []:
        yield d.get("containerEdits") or {}


class FleetDay(RuleBasedStateMachine):
    @initialize(healthy=st.sampled_from([True, True, False]))
    def machine(self, healthy=False):
        """A machine booted ready on a host that staged V1 and loaded its module, with one GPU (as most
        of a fleet is when its day starts), or on a host that has done nothing yet."""
        self.m = MachineRoot()
        self.m.add_control_nodes()
        # The machine's /run a tmpfs of RUN_SIZE_KIB (staging, the driver root, status.json on it), in
        # the test's own mount namespace (main() re-executes it in one when root).
        self.sized = IN_PRIVATE_MOUNTS
        if self.sized:
            os.makedirs(self.m.p("/run"))
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={RUN_SIZE_KIB}k,mode=0755", "tmpfs", self.m.p("/run")], check=True)
            # Staging is the host's bind, on the host's file system: a full /run leaves it be.
            os.makedirs(self.m.p("/.host-staging"))
            os.makedirs(self.m.p("/run/host-nvidia"))
            subprocess.run(["mount", "--bind", self.m.p("/.host-staging"), self.m.p("/run/host-nvidia")], check=True)
            os.makedirs(self.m.p("/.host-licensing"))
            os.makedirs(self.m.p(LICENSING))
            subprocess.run(["mount", "--bind", self.m.p("/.host-licensing"), self.m.p(LICENSING)], check=True)
        os.makedirs(self.m.p(METRICS))
        # No waiting: a host that has not staged is an event of its own here, not something to wait out.
        # No runtime runs here, so nothing would restart the GPU consumers after a driver change and
        # verify would wait for them: that is unbounded-nvidia-consumers' own (integration-consumers,
        # the containerd tier). setup still numbers the driver root's generations, under the kills.
        self.m.config("staging_timeout: 0s\nrefresh:\n  settle_time: 0s\n  settle_limit: 0s\n"
                      "licensing:\n  jitter: 0s\n  settle_time: 400ms\n  stop_timeout: 5s\n"
                      "consumers:\n  enabled: false\n")
        self.licensing_starts()
        self.staged = None  # the version staged completely, "half", or None
        self.module = None
        self.gpus = set()
        self.mig = {}  # GPU minor -> its compute instances
        self.imex = set()
        self.nvswitches = False
        self.daemons = set()
        self.filled = False
        self.containerd = "none"
        self.foreign = "none"
        self.last = None  # the last setup's or refresh's JSON (status.json's), None after a killed one
        self.last_metrics = None  # the last run's of any command but verify (the metrics')
        STATS["sequences"] += 1
        if healthy:
            self.host_staging(V1, "complete")
            self.host_loads_module(V1)
            self.gpu_change(0, True)
            self.boot_setup(None)

    def teardown(self):
        try:
            if hasattr(self, "gridd"):
                self.stop_gridd()
        finally:
            if getattr(self, "sized", False):
                subprocess.run(["umount", "-R", "-l", self.m.p("/run")], check=False)
            self.m.cleanup()

    # -- the host --------------------------------------------------------------------------------
    @rule(version=st.sampled_from(VERSIONS), how=st.sampled_from(["complete", "half", "unbound"]))
    def host_staging(self, version, how):
        """The host stages `version` completely, or half (libcuda of `version` beside a libnvidia-ml of
        the other: caught mid-upgrade), or unbinds its staging."""
        self.m.clear_staging()
        self.staged = None
        if how == "unbound":
            return
        self.m.stage_all(version, unrelated=False)
        self.staged = version
        if how == "half":
            other = V2 if version == V1 else V1
            d = self.m.p("/run/host-nvidia/0")
            os.rename(os.path.join(d, f"libnvidia-ml.so.{version}"), os.path.join(d, f"libnvidia-ml.so.{other}"))
            self.staged = "half"

    @rule(version=st.sampled_from(VERSIONS))
    def host_loads_module(self, version):
        self.m.set_proc_version(version)
        self.module = version

    @rule(minor=st.sampled_from(MINORS), present=st.booleans())
    def gpu_change(self, minor, present):
        """A GPU (its /proc entry and node) arrives, or falls off the bus."""
        shutil.rmtree(self.m.p(f"/proc/driver/nvidia/gpus/{bus(minor)}"), ignore_errors=True)
        if os.path.lexists(self.m.p(f"/dev/nvidia{minor}")):
            os.unlink(self.m.p(f"/dev/nvidia{minor}"))
        self.gpus.discard(minor)
        self.mig_off(minor)
        if present:
            self.m.add_gpu(minor, bus(minor), uuid(minor))
            self.gpus.add(minor)

    def write_proc_devices(self):
        self.m.write_proc_devices(fabric=self.nvswitches)

    @precondition(lambda self: self.gpus)
    @rule(data=st.data(), instances=st.integers(min_value=0, max_value=3))
    def mig_change(self, data, instances):
        """The host's operator makes `instances` GPU instances of one compute instance each on a GPU,
        or (0) turns MIG off there."""
        minor = data.draw(st.sampled_from(sorted(self.gpus)))
        self.mig_off(minor)
        if instances:
            self.m.add_mig(minor, {gi: [0] for gi in range(7, 7 + instances)})
            self.write_proc_devices()
            self.mig[minor] = instances

    def mig_off(self, minor):
        shutil.rmtree(self.m.p(f"/proc/driver/nvidia/capabilities/gpu{minor}"), ignore_errors=True)
        for gi in range(15):
            for ci in (None, *range(8)):
                node = self.m.p(f"/dev/nvidia-caps/nvidia-cap{MachineRoot.cap_minor(minor, gi, ci)}")
                if os.path.lexists(node):
                    os.unlink(node)
        self.mig.pop(minor, None)

    @rule(channels=st.sets(st.integers(min_value=0, max_value=3), max_size=3))
    def imex_channels_change(self, channels):
        shutil.rmtree(self.m.p("/dev/nvidia-caps-imex-channels"), ignore_errors=True)
        if channels:
            self.m.add_imex_channels(sorted(channels))
            self.write_proc_devices()
        self.imex = set(channels)

    @rule(present=st.booleans())
    def nvswitches_change(self, present):
        for name in ("nvidia-nvswitch0", "nvidia-nvswitch1", "nvidia-nvswitchctl"):
            if os.path.lexists(self.m.p(f"/dev/{name}")):
                os.unlink(self.m.p(f"/dev/{name}"))
        self.nvswitches = present
        if present:
            self.m.add_fabric(nvswitches=(0, 1))
        self.write_proc_devices()

    @rule(daemon=st.sampled_from(sorted(DAEMONS)), running=st.booleans())
    def daemon_change(self, daemon, running):
        """nvidia-persistenced or the fabric manager starts (its socket appears) or stops (it goes)."""
        import socket
        path = self.m.p(DAEMONS[daemon])
        if os.path.lexists(path):
            os.unlink(path)
        if running:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(path)
            self.daemons.add(daemon)
        else:
            self.daemons.discard(daemon)

    @precondition(lambda self: self.sized)
    @rule(free_kib=st.sampled_from([None, 0, 64, 400, 900]))
    def run_space(self, free_kib):
        """Another tenant fills the machine's /run, leaving free_kib, or (None) frees it."""
        path = self.m.p(FILLER)
        if os.path.exists(path):
            os.unlink(path)
        self.filled = free_kib is not None
        if not self.filled:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        st_ = os.statvfs(self.m.p("/run"))
        room = st_.f_bavail * st_.f_frsize - free_kib * 1024
        with open(path, "wb") as f:
            try:
                f.write(b"\0" * max(room, 0))
            except OSError:
                pass  # full already

    @rule(kind=st.sampled_from(sorted(CONTAINERD)))
    def containerd_change(self, kind):
        for path in ("/var/lib/dpkg/status", "/etc/containerd/config.toml", "/usr/bin/containerd"):
            if os.path.exists(self.m.p(path)):
                os.unlink(self.m.p(path))
        if CONTAINERD[kind]:
            version, config = CONTAINERD[kind]
            write(self.m.p("/var/lib/dpkg/status"), dpkg_status(version))
            self.m.install_containerd(version)
            if config:
                write(self.m.p("/etc/containerd/config.toml"), config)
        self.containerd = kind

    @rule(kind=st.sampled_from(FOREIGN), version=st.sampled_from(VERSIONS))
    def foreign_spec_change(self, kind, version):
        for path in ("/var/run/cdi/nvidia.yaml", "/var/run/cdi/extra.yaml", PLUGIN_SPEC):
            if os.path.exists(self.m.p(path)):
                os.unlink(self.m.p(path))
        if kind == "shadowing":
            write(self.m.p("/var/run/cdi/nvidia.yaml"), gpu_spec(["all", "0"]))
        elif kind == "second":
            write(self.m.p("/var/run/cdi/extra.yaml"), gpu_spec(["gpu-extra"]))
        elif kind == "device-plugin":
            write(self.m.p(PLUGIN_SPEC), plugin_spec(self.m, version))
        self.foreign = kind

    # -- licensing -----------------------------------------------------------------------------------
    def licensing_starts(self):
        """What the boot install left: license A installed; nvidia-gridd's unit active, with no process
        of the fake manager's yet (the first restart starts the stand-in)."""
        self.gridd = self.m.p("/usr/bin/nvidia-gridd")
        self.gridd_log = self.m.p("/var/log/nvidia-gridd.log")
        write(self.gridd, GRIDD.format(conf=self.m.p(GRIDD_CONF), token=self.m.p(TOKEN), log=self.gridd_log), 0o755)
        write(self.gridd_log, "")
        self.units_file = self.m.path + "-units.json"  # beside the root, as PID 1 is outside the machine
        with open(self.units_file, "w") as f:
            json.dump({"units": {GRIDD_UNIT: {"active_state": "active", "exec": [self.gridd]}}, "calls": []}, f)
        self.license_rotates("A")
        write(self.m.p(GRIDD_CONF), self.license_conf("A"))
        write(self.m.p(TOKEN), "A", 0o600)
        self.sigkill_allowed = False
        self.license_quiet = False  # nothing rotated, changed or killed since the last unkilled reload
        self.maybe_good = set()
        self.calls_seen = 0
        self.log_seen = 0
        self.good = "A"  # the last content nvidia-gridd stayed up with (or was installed at boot)

    @staticmethod
    def license_conf(content):
        return "BROKEN\n# license broken\n" if content == "broken" else f"FeatureType=1\n# license {content}\n"

    def stop_gridd(self):
        """Every stand-in of this machine: the one the fake manager knows, and any a reloader killed
        between its start and its record left running."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    mine = self.gridd.encode() in f.read().split(b"\0")
                if mine:
                    os.killpg(int(pid), 9)  # the stand-in's group: the shell and its sleep
            except OSError:
                pass
        os.unlink(self.units_file)
        reap()

    @rule(content=st.sampled_from(LICENSES), kill_at=st.one_of(st.just("no reload"), KILLS))
    def license_rotates(self, content, kill_at="no reload"):
        """The host rotates the licensing files (or breaks them): gridd.conf and the token. The .path
        unit's reload follows (killed at kill_at), unless the machine is down ("no reload")."""
        write(self.m.p(f"{LICENSING}/gridd.conf"), self.license_conf(content))
        write(self.m.p(f"{LICENSING}/client_configuration_token.tok"), content)
        self.source = content
        self.rotation_starts = 0  # the stand-in's starts with this content since it came
        self.kills_since_rotation = 0
        self.license_quiet = False
        if kill_at != "no reload":
            self.license_reload(kill_at)

    @rule(setting=st.sampled_from(["our drop-in", "SendSIGKILL=yes", "KillSignal=SIGKILL"]))
    def gridd_dropin_change(self, setting):
        """nvidia-gridd's unit could be SIGKILLed (our drop-in lost or overridden: SendSIGKILL=yes, or
        KillSignal=SIGKILL itself), or not (again)."""
        with open(self.units_file) as f:
            doc = json.load(f)
        doc["units"][GRIDD_UNIT]["send_sigkill"] = setting == "SendSIGKILL=yes"
        doc["units"][GRIDD_UNIT]["kill_signal"] = 9 if setting == "KillSignal=SIGKILL" else 15
        with open(self.units_file, "w") as f:
            json.dump(doc, f)
        self.sigkill_allowed = setting != "our drop-in"
        self.license_quiet = False

    @rule(kill_at=KILLS)
    def license_reload(self, kill_at):
        """The reloader's run (its .path unit's or .timer's). Killed at a drawn call of the reloader itself (not of the stand-in it
        starts: no -f)."""
        cmd = [LICENSE_BIN, "--root", self.m.path]
        if kill_at is not None:
            cmd = ["strace", "-qq", "-o", "/dev/null", "-e", f"inject={kill_at[0]}:signal=KILL:when={kill_at[1]}", *cmd]
        STATS["runs"] += 1
        # The tests' PID 1 listens in the root for the reloader's run only: setup, refresh and verify
        # here are judged without a service manager, as before licensing came.
        pid1 = FakeSystemd(self.m.path, self.units_file).start()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=MachineRoot.run_env())
        finally:
            pid1.stop()
        reap()
        calls, log = self.new_license_events()
        assert all(c.endswith("signal 15") for c in calls if c.startswith("stop ")), f"license: a stop with another signal: {calls}"
        # A unit that could be SIGKILLed is never stopped; one that is down (our killed restart's stop
        # left it so, or it failed) may be started: that stops nothing.
        stops = [c for c in calls if c.startswith("stop ")]
        start_only = not stops and any(c.startswith("start ") for c in calls)
        assert not (self.sigkill_allowed and stops), f"license: stopped a unit that could be SIGKILLed: {calls}"
        starts = [line.split(" ", 1)[1] for line in log if line.startswith("start ")]
        STATS["license runs"] += 1
        STATS["gridd starts"] += len(starts)
        mine = sum(1 for s_ in starts if s_ == f"{self.source}/{self.source}")
        self.rotation_starts += mine
        if kill_at is not None:
            self.kills_since_rotation += 1
            self.license_quiet = False
            if self.source != "broken":
                self.maybe_good.add(self.source)  # it may have been applied before the kill
            return
        # Unkilled: at most one start with the source's content for each time it came (a killed run
        # before may have started it already, unrecorded: then one more); nothing at all when nothing
        # rotated, changed or was killed since the last unkilled run (no restart loop).
        assert self.rotation_starts <= 1 + self.kills_since_rotation, \
            f"license: nvidia-gridd started {self.rotation_starts} times with license {self.source}: {log}"
        assert not (self.license_quiet and calls), f"license: a run with nothing new restarted nvidia-gridd: {calls}"
        self.license_quiet = True
        installed = self.installed_license()
        assert installed[0] == installed[1], f"license: installed files of two contents {installed} after a run"
        if self.source != "broken" and not self.sigkill_allowed:
            assert r.returncode == 0, f"license: a good rotation failed: {r.stderr[-600:]}"
            assert installed[0] == self.source, f"license: {installed} installed, the source is {self.source}"
            self.good, self.maybe_good = self.source, set()
        else:  # broken, or a unit we may not restart: the last known good stays (or one a killed run applied)
            # Only a daemon that was down and was started with the source's very files (its log says so).
            started = {self.source} if start_only and f"{self.source}/{self.source}" in starts and r.returncode == 0 else set()
            assert installed[0] in {self.good} | self.maybe_good | started, \
                f"license: {installed} installed, the last known good is {self.good} (or one of {sorted(self.maybe_good)}): {r.stderr[-400:]}"
            if installed[0] in started:  # a daemon that was down, started with the source's files: applied
                self.good, self.maybe_good = self.source, set()
                self.assert_gridd_runs()
        if not self.sigkill_allowed:
            self.assert_gridd_runs()

    def assert_gridd_runs(self):
        """After an unkilled run, the nvidia-gridd the fake manager started (if any) runs: a rotation or
        a rollback never leaves it down."""
        with open(self.units_file) as f:
            unit = json.load(f)["units"][GRIDD_UNIT]
        if "exec" in unit and unit.get("main_pid", 0) == 0 and unit.get("active_state") != "active":
            raise AssertionError(f"license: nvidia-gridd left {unit.get('active_state')} after a run")
        pid = unit.get("main_pid", 0)
        if pid:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                state = "gone"
            assert state not in ("Z", "X", "gone"), f"license: nvidia-gridd (PID {pid}) is {state} after a run"

    def installed_license(self):
        with open(self.m.p(GRIDD_CONF)) as f:
            conf = re.search(r"# license (\S+)", f.read())
        with open(self.m.p(TOKEN)) as f:
            token = f.read()
        return (conf.group(1) if conf else None, token)

    def new_license_events(self):
        """The stops and starts asked of the fake manager, and what the stand-in logged, since last time."""
        with open(self.units_file) as f:
            calls = [c for c in json.load(f)["calls"] if not c.startswith("state ")]
        with open(self.gridd_log) as f:
            log = f.read().splitlines()
        new = (calls[self.calls_seen:], log[self.log_seen:])
        self.calls_seen, self.log_seen = len(calls), len(log)
        return new

    # -- the machine -----------------------------------------------------------------------------
    def run(self, *args, kill_at=None):
        """kill_at: (system calls, N): SIGKILL at the N-th call of whichever of them gets there first."""
        cmd = [SETUP, "--root", self.m.path, *args]
        env = MachineRoot.run_env()
        if BROKEN == "verify-ignores-module" and "verify" in args:
            env.update(preload_env(fixture("hide_module_shim.so")))
        if kill_at is not None:
            # SIGKILL at the kill_at-th call of whichever system call gets there first: deterministic, so
            # that a failure shrinks and replays.
            calls, n = kill_at
            cmd = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"inject={calls}:signal=KILL:when={n}", *cmd]
        STATS["runs"] += 1
        before = self.outside()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        after = self.outside()
        assert before == after, f"untouched: {' '.join(args)} changed staging, /proc, /dev, /var/run/cdi or another tenant's /run"
        return r

    def outside(self):
        """Staging, /proc, /dev, /var/run/cdi and another tenant's files in /run/nvidia, without
        /dev/char: its major:minor links to the driver's nodes are setup's own (as nvidia-ctk's
        create-dev-char-symlinks makes them, lib/cdi/dev_char.hpp). The filler's content is not read."""
        out = {p: snapshot(self.m.p(p)) for p in ("/run/host-nvidia", "/proc", "/dev", "/var/run/cdi")}
        out["/dev"] = {k: v for k, v in (out["/dev"] or {}).items() if k != "char" and not k.startswith("char/")}
        filler = self.m.p(FILLER)
        out["filler"] = os.path.getsize(filler) if os.path.exists(filler) else None
        return out

    def can_go_live(self):
        return self.staged in VERSIONS and self.staged == self.module and bool(self.gpus) and not self.filled

    def consumers_take_it(self):
        """containerd (or, without one, the CDI library's defaults) would give pods our devices."""
        if self.containerd == "1.7-cdi-off" or self.foreign == "shadowing":
            return False
        if self.foreign == "device-plugin":  # a pod through the device plugin needs its spec's files and nodes
            with open(self.m.p(PLUGIN_SPEC)) as f:
                doc = json.load(f)
            return all(os.path.exists(self.m.p(p)) for p in self.host_paths(doc)) and \
                all(os.path.exists(self.m.p(p)) for p, _, _ in self.nodes(doc))
        return True

    @rule(kill_at=KILLS)
    def boot_setup(self, kill_at):
        r = self.run("--json", "setup", kill_at=kill_at)
        self.after_run("setup", r, kill_at)

    @rule(kill_at=KILLS)
    def refresh(self, kill_at):
        r = self.run("--json", "refresh", kill_at=kill_at)
        self.after_run("refresh", r, kill_at)

    @rule(kill_at=KILLS)
    def cleanup(self, kill_at):
        """The cleanup unit's run (a machine that is no NVIDIA machine any more), at any time: it removes
        our specs; whatever verify says next must still be true."""
        r = self.run("--json", "cleanup", kill_at=kill_at)
        self.last_metrics = json.loads(r.stdout) if kill_at is None else None
        if kill_at is None:
            assert r.returncode == 0, f"cleanup failed: {r.stderr[-600:]}"
            for spec in OUR_SPECS:
                assert not os.path.exists(self.m.p(spec)), f"cleanup left {spec}"

    def after_run(self, verb, r, kill_at):
        if kill_at is not None:  # its records may be written or not: unknown until the next run
            self.last = self.last_metrics = None
            return
        result = json.loads(r.stdout) if r.stdout.strip() else None
        assert result is not None, f"{verb} printed no JSON (exit {r.returncode}): {r.stderr[-600:]}"
        self.last = self.last_metrics = result
        if self.can_go_live():
            assert r.returncode == 0, f"live: {verb} failed though the host staged the module's version {self.module}: {r.stderr[-600:]}"
            # A second spec of our kind leaves pods our devices, but verify judges a file not ours
            # one-sidedly (foreign_spec.hpp): any that names our kind is not ready.
            if self.consumers_take_it() and self.foreign != "second":
                STATS["live"] += 1
                v = self.run("--json", "verify")
                assert v.returncode == 0, f"live: verify after a good {verb} is not ready: {v.stdout[-800:]}"
        if r.returncode == 0:
            ours = {"driver", "validations"}
            leftovers = [n for n in os.listdir(self.m.p("/run/nvidia")) if n not in ours and n != "lost+found"] \
                if os.path.isdir(self.m.p("/run/nvidia")) else []
            leftovers += [n for n in os.listdir(self.m.p("/etc/cdi")) if not n.endswith(".yaml")] if os.path.isdir(self.m.p("/etc/cdi")) else []
            assert not leftovers, f"clean: {verb} left {leftovers}"

    # -- what must hold after every step -----------------------------------------------------------
    def manifest(self):
        path = os.path.join(self.m.driver_root(), ".unbounded-manifest.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    @invariant()
    def root_is_one_complete_tree(self):
        STATS["steps"] += 1
        root = self.m.driver_root()
        if not os.path.lexists(root):
            return
        doc = self.manifest()
        assert doc is not None, "root: a driver root without its manifest"
        want = {e["path"] for e in doc["entries"]}
        for e in doc["entries"]:
            p = os.path.join(root, e["path"])
            if e["type"] == "file":
                assert os.path.isfile(p) and not os.path.islink(p), f"root: {e['path']} missing"
                assert os.path.getsize(p) == e["size"], f"root: {e['path']} has another size than its manifest says"
            elif e["type"] == "link":
                assert os.readlink(p) == e["target"], f"root: {e['path']} points elsewhere"
        have = set()
        for dirpath, dirnames, filenames in os.walk(root):
            for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                have.add(os.path.relpath(os.path.join(dirpath, n), root))
        extra = have - want - {".unbounded-manifest.json"}
        assert not extra, f"root: files the manifest does not name: {sorted(extra)[:5]}"
        versions = {m.group(1) for p in want for m in [re.search(r"\.so\.(\d{3}\.\d+(?:\.\d+)?)$", p)] if m}
        assert versions <= {doc["driver_version"]}, f"root: mixed versions {versions}"

    @invariant()
    def spec_paths_exist(self):
        """Every hostPath into our driver root of every spec we wrote exists (the host's own paths, a
        daemon's socket, may go with the host's events: then verify must say so, check_truthful)."""
        doc = self.manifest()
        for spec in OUR_SPECS:
            if not os.path.exists(self.m.p(spec)):
                continue
            for host_path in self.host_paths(spec_doc(self.m.p(spec))):
                if host_path.startswith("/run/nvidia/driver/"):
                    assert os.path.lexists(self.m.p(host_path)), f"spec: hostPath {host_path} of {spec} does not exist"
        if doc is not None and os.path.exists(self.m.p(SPEC)):
            with open(self.m.p(SPEC)) as f:
                assert f"libcuda.so.{doc['driver_version']}" in f.read(), "spec: it does not serve the root's version"

    @invariant()
    def records_agree_with_the_last_run(self):
        """status.json and the metrics say what the last setup or refresh said, or nothing (a full /run
        may keep a record from being written; it must never leave an older one standing)."""
        if self.last is not None and os.path.exists(self.m.p(STATUS)):
            with open(self.m.p(STATUS)) as f:
                status = json.load(f)
            assert (status["command"], status["outcome"]) == (self.last["command"], self.last["outcome"]), \
                f"records: status.json says {status['command']} {status['outcome']}, the last run {self.last['command']} {self.last['outcome']}"
        prom = self.m.p(f"{METRICS}/unbounded-nvidia-setup.prom")
        last = self.last_metrics
        if last is not None and os.path.exists(prom):
            with open(prom) as f:
                text = f.read()
            line = f'unbounded_nvidia_outcome_info{{command="{last["command"]}",outcome="{last["outcome"]}"}} 1'
            assert line in text, f"records: the metrics do not say {last['command']} {last['outcome']}"
            assert f"unbounded_nvidia_ready {int(last['ready'])}" in text, "records: the metrics' ready is another"

    @staticmethod
    def host_paths(doc):
        for e in edits(doc):
            for m in e.get("mounts") or []:
                yield m["hostPath"]

    @staticmethod
    def nodes(doc):
        for e in edits(doc):
            for n in e.get("deviceNodes") or []:
                yield n.get("hostPath") or n["path"], n.get("major"), n.get("minor", 0)

    @invariant()
    def verify_is_truthful(self):
        """verify, after every step: ready only when pods can work."""
        v = self.run("--json", "verify")
        if v.returncode != 0:
            return
        STATS["ready"] += 1
        doc = self.manifest()
        assert doc is not None, "truthful: verify ready without a driver root"
        if self.module is not None:
            assert doc["driver_version"] == self.module, f"truthful: verify ready with root {doc['driver_version']} under module {self.module}"
        main_spec = spec_doc(self.m.p(SPEC))
        names = [d["name"] for d in main_spec["devices"]]
        offered = {n for n in names if n.startswith("GPU-")}
        whole = {uuid(g) for g in self.gpus if g not in self.mig}
        assert offered == whole, f"truthful: verify ready but the spec offers {sorted(offered)}, the machine's whole GPUs are {sorted(whole)}"
        mig = sum(self.mig.values())
        assert sum(1 for n in names if re.fullmatch(r"\d+:\d+", n)) == mig, f"truthful: verify ready but the spec's MIG devices are not the machine's {mig}"
        if self.imex:
            channels = {d["name"] for d in spec_doc(self.m.p(IMEX_SPEC))["devices"]} - {"all"}
            assert channels == {str(i) for i in self.imex}, f"truthful: verify ready but the IMEX spec offers {sorted(channels)}"
        for spec in OUR_SPECS:
            if not os.path.exists(self.m.p(spec)):
                continue
            d = spec_doc(self.m.p(spec))
            for host_path in self.host_paths(d):
                assert os.path.lexists(self.m.p(host_path)), f"truthful: verify ready but {spec}'s hostPath {host_path} does not exist"
            for path, major, minor in self.nodes(d):
                st_ = os.stat(self.m.p(path)) if os.path.exists(self.m.p(path)) else None
                assert st_ is not None, f"truthful: verify ready but {spec}'s device node {path} does not exist"
                if major is not None:
                    assert (os.major(st_.st_rdev), os.minor(st_.st_rdev)) == (major, minor), f"truthful: {path} is another device than {spec} says"
        assert self.consumers_take_it(), f"truthful: verify ready but containerd ({self.containerd}) or a foreign spec ({self.foreign}) keeps pods from our devices"


def budget():
    return settings(max_examples=int(os.environ.get("STATEFUL_EXAMPLES", "300")),
                    stateful_step_count=int(os.environ.get("STATEFUL_STEPS", "25")),
                    deadline=None, database=DirectoryBasedExampleDatabase(EXAMPLES),
                    suppress_health_check=list(HealthCheck), print_blob=True,
                    # Not Phase.explain: after a failure it traces every line of every replay (sys.settrace),
                    # which made a soak's shrink run for most of an hour; the shrunk story says enough.
                    phases=[p for p in Phase if p != Phase.explain and (p != Phase.shrink or os.environ.get("STATEFUL_SHRINK", "1") == "1")])


class TestStories(unittest.TestCase):
    """Shrunk stories, replayed step by step in every run: each once failed (tests/README.md says when)."""

    def replay(self, steps, healthy=False):
        state = FleetDay()
        try:
            state.machine(healthy)
            for name, kwargs in steps:
                getattr(state, name)(**kwargs)
                state.root_is_one_complete_tree()
                state.spec_paths_exist()
                state.records_agree_with_the_last_run()
                state.verify_is_truthful()
        finally:
            state.teardown()

    @unittest.skipUnless(IN_PRIVATE_MOUNTS, "needs root for a private tmpfs /run (CI runs as root)")
    def test_a_full_run_leaves_no_older_status_standing(self):
        """Found by this tier: a refresh that could not write status.json on a full /run left setup's
        "ready" there, though the refresh failed."""
        self.replay([("host_staging", {"version": V1, "how": "complete"}), ("host_loads_module", {"version": V1}),
                     ("gpu_change", {"minor": 0, "present": True}), ("boot_setup", {"kill_at": None}), ("run_space", {"free_kib": 0}),
                     ("host_staging", {"version": V2, "how": "complete"}), ("refresh", {"kill_at": None})])

    def test_a_rollback_killed_twice_keeps_the_last_known_good(self):
        """Found by this tier: a broken rotation on a machine whose files were never recorded as
        applied, killed in its rollback and again in the next run, left the broken files installed with
        no record of the good ones; the run after recorded the broken files as the applied ones."""
        # The kills, where the service manager was a file the reloader itself rewrote: after the
        # broken files' start job, before they were judged; then early in the next run, at its third
        # look at the unit.
        self.replay([("license_rotates", {"content": "broken", "kill_at": ("sendmsg", 30)}),
                     ("license_rotates", {"content": "broken", "kill_at": ("sendmsg", 18)}),
                     ("license_reload", {"kill_at": None})], healthy=True)

    def test_a_broken_rotation_and_its_reload_killed_mid_rename_leave_nvidia_gridd_running(self):
        """Found by this tier on a fresh seed in a CI run (seed 3002627343): a broken rotation killed at
        its 7th rename, the next reload killed at its 11th, and a reload after that left nvidia-gridd
        failed. Two kills mid-rename must never cost the last known good."""
        # The kills as then: at the look at the unit before the restart; in the rollback, at the look
        # before its restart (the good files back, nvidia-gridd not yet run with them).
        self.replay([("license_rotates", {"content": "broken", "kill_at": ("sendmsg", 18)}),
                     ("license_reload", {"kill_at": ("sendmsg", 39)}),
                     ("license_reload", {"kill_at": None})], healthy=True)

    def test_a_restart_killed_between_stop_and_start_is_finished(self):
        """Found by this tier (once a resumed restart no longer started a unit that was merely down): a
        reload killed between its stop job and its start job left nvidia-gridd stopped, and the next
        run, for the content nvidia-gridd ran with before, left it so."""
        # Killed before its StartUnit call, the stop job done.
        self.replay([("license_rotates", {"content": "B", "kill_at": ("sendmsg", 29)}),
                     ("license_rotates", {"content": "A", "kill_at": None})], healthy=True)

    def test_a_gridd_our_killed_restart_left_stopped_is_started_though_it_could_be_sigkilled(self):
        """Found by the soak (2026-12-06, binaries of c877375, a loaded machine): a rotation killed
        between its stop job and its start job left nvidia-gridd stopped; its unit then lost our drop-in
        (SendSIGKILL=yes), so every later run refused to restart it, and a rotation after that was
        installed "for its next start" and recorded as applied with no nvidia-gridd ever running it.
        Starting a daemon that is not running stops nothing, so nothing can SIGKILL it."""
        self.replay([("license_rotates", {"content": "C", "kill_at": ("sendmsg", 29)}),
                     ("gridd_dropin_change", {"setting": "SendSIGKILL=yes"}),
                     ("license_rotates", {"content": "A", "kill_at": None}),
                     ("license_rotates", {"content": "B", "kill_at": None})], healthy=True)

    def test_a_side_spec_killed_while_written_leaves_no_temp_file_once_its_devices_go(self):
        """Found by the soak (2026-12-06, seed 2004002626): a boot setup killed at its first write, the
        IMEX channels' spec then being written, left its temp file in /etc/cdi; the channels went, and
        every later setup, with no such spec to write, left that file there."""
        self.replay([("imex_channels_change", {"channels": {0}}),
                     ("boot_setup", {"kill_at": ("copy_file_range,sendfile,write", 1)}),
                     ("imex_channels_change", {"channels": set()}),
                     ("boot_setup", {"kill_at": None})], healthy=True)

    def test_a_restart_resumed_with_the_applied_files_and_killed_while_installing_them(self):
        """Found by the soak (2026-12-06, seed 2039919120): a rotation killed in its restart, then the
        rotation back to the applied content killed while the resumed restart put those files back
        (gridd.conf installed, the token not yet), left half a pair installed, and the next run took
        the record of that restart for a finished one: two contents installed, or the old ones kept."""
        # Killed before its StartUnit call; then at the token's fsync, gridd.conf renamed into place.
        self.replay([("license_rotates", {"content": "C", "kill_at": ("sendmsg", 29)}),
                     ("license_rotates", {"content": "A", "kill_at": ("fsync,fdatasync,syncfs", 5)}),
                     ("license_reload", {"kill_at": None})], healthy=True)

    def test_a_device_plugin_spec_naming_a_gpu_gone(self):
        """The model's error the soak found (kept so it stays right): the device plugin's spec names
        /dev/nvidia0, which fell off; verify is right not to be ready with GPU 2 there."""
        self.replay([("foreign_spec_change", {"kind": "device-plugin", "version": V1}), ("gpu_change", {"minor": 2, "present": True}),
                     ("gpu_change", {"minor": 0, "present": False}), ("boot_setup", {"kill_at": None})], healthy=True)

    def test_a_kept_root_removes_what_a_killed_run_left(self):
        """Found by the soak (seed 2358414314, not shrunk): a setup killed while it removed a tree left a
        temporary tree, and a later setup that kept the live root (the host staged a version the loaded
        module is not) succeeded and left it standing in /run."""
        self.replay([("boot_setup", {"kill_at": ('all', 15)}),
                     ("boot_setup", {"kill_at": None}),
                     ("host_staging", {"how": 'complete', "version": V1}),
                     ("host_staging", {"how": 'half', "version": V1}),
                     ("boot_setup", {"kill_at": None}),
                     ("gpu_change", {"minor": 0, "present": True}),
                     ("gpu_change", {"minor": 2, "present": True}),
                     ("boot_setup", {"kill_at": None}),
                     ("boot_setup", {"kill_at": None}),
                     ("gpu_change", {"minor": 2, "present": True}),
                     ("gpu_change", {"minor": 2, "present": True}),
                     ("host_staging", {"how": 'half', "version": V2}),
                     ("host_staging", {"how": 'unbound', "version": V1}),
                     ("boot_setup", {"kill_at": ('all', 2)}),
                     ("gpu_change", {"minor": 1, "present": True}),
                     ("gpu_change", {"minor": 0, "present": False}),
                     ("host_staging", {"how": 'complete', "version": V1}),
                     ("boot_setup", {"kill_at": ('unlinkat,rmdir', 4)}),
                     ("host_staging", {"how": 'complete', "version": V2}),
                     ("boot_setup", {"kill_at": None})], healthy=True)

    def test_the_broken_build_s_story_is_caught(self):
        """The tier can fail: verify with the kernel module hidden from it (the deliberately broken build)
        says ready on a root the loaded module cannot use, and the truthful invariant says so."""
        global BROKEN
        story = [("host_loads_module", {"version": V2})]  # on a machine booted ready with V1
        self.replay(story, healthy=True)  # the real build: ready is never said
        BROKEN, saved = "verify-ignores-module", BROKEN
        try:
            with self.assertRaisesRegex(AssertionError, f"truthful: verify ready with root {V1} under module {V2}"):
                self.replay(story, healthy=True)
        finally:
            BROKEN = saved


# make check's and CI's seed, as the oracle tier's 44: in the tree, so a commit's verdict depends on its
# code alone (a seed drawn per run, or per commit hash, let a commit fail on a defect it did not
# touch); changed only by a commit that says so. Fresh seeds are make soak's.
CHECK_SEED = 47


class TestFleetDay(unittest.TestCase):
    def test_sequences(self):
        minutes = float(os.environ.get("STATEFUL_MINUTES", "0"))
        end = time.monotonic() + minutes * 60
        rounds = 0
        while True:
            seed = int(os.environ.get("STATEFUL_SEED") or CHECK_SEED) if rounds == 0 and not minutes \
                else random.SystemRandom().randrange(2**32)
            print(f"# stateful seed {seed} (STATEFUL_SEED={seed} replays it)", flush=True)
            case = FleetDay.TestCase
            case.settings = budget()
            from hypothesis import seed as with_seed
            with_seed(seed)(FleetDay)  # the machine class is where hypothesis' stateful runner reads it
            # Hypothesis' own reports (the falsifying story, a slow shrink's warning) as TAP comments:
            # a bare line would be an unknown TAP line to meson.
            from hypothesis.reporting import with_reporter
            with with_reporter(lambda text: print("# " + str(text).replace("\n", "\n# "), flush=True)):
                case("runTest").runTest()
            rounds += 1
            if minutes:  # a soak: the running count, so a late failure still shows what passed before it
                print(f"# round {rounds} passed: {STATS['sequences']} sequences, {STATS['steps']} steps so far", flush=True)
            if time.monotonic() >= end:
                break
        print(f"# {rounds} round(s): {STATS['sequences']} sequences, {STATS['steps']} steps, {STATS['runs']} runs of the binaries, "
              f"{STATS['ready']} steps verify said ready after, {STATS['live']} live checks, "
              f"{STATS['license runs']} license reloads, {STATS['gridd starts']} nvidia-gridd starts", flush=True)


if __name__ == "__main__":
    if IS_ROOT and not IN_PRIVATE_MOUNTS and shutil.which("unshare"):
        # A full /run needs a small tmpfs, mounted where only this test sees it.
        os.environ["STATEFUL_PRIVATE_MOUNTS"] = "1"
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", sys.executable, *sys.argv])
    become_subreaper()
    main()
