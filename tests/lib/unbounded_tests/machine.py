"""A test machine: a copy of the image with the project installed (prefix /usr) and the stand-in
units, booted with systemd-nspawn in a private mount namespace with a tmpfs /run, fake staging bind
mounts, fake device nodes and a scenario script that runs once the machine is up and powers it off."""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

from . import TESTS_DIR
from .image import BUILDER_LOCK, SOURCE, base_image

BUILD = os.environ.get("BUILD_ROOT", os.path.join(SOURCE, "build"))
STANDINS = os.path.join(TESTS_DIR, "system", "standins")
BOOT_TIMEOUT = 180

SCENARIO_HEADER = """#!/bin/sh
# Scenario script, run inside the machine by unbounded-test-scenario.service.
out=/var/lib/standin
mkdir -p $out
wait_for() {  # wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds
	t=$(( $1 * 5 )); shift
	while [ $t -gt 0 ]; do "$@" && return 0; sleep 0.2; t=$((t - 1)); done
	echo "timed out waiting for: $*" >> $out/scenario-errors
	return 1
}
host_turn() {  # host_turn N: the host side of the test does its step N while the machine runs
	touch $out/host-turn-$1
	wait_for 60 test -e $out/host-done-$1
}
verify_now() {  # what verify says once containerd (when it started) and kubelet are up: it wants both active
	[ -d $out/containerd ] || return 0
	/usr/bin/unbounded-nvidia-setup verify --json > $out/containerd/verify.json 2> $out/containerd/verify.err
	echo $? > $out/containerd/verify.rc
}
verify_now
"""


class Machine:
    def __init__(self, testcase, name, base=None, real_containerd=False, installed=True):
        """`base`: another cached image than the system tier's (the containerd tier's trixie);
        `real_containerd`: keep the image's own containerd.service instead of the stand-in;
        `installed=False`: neither the project nor the stand-ins, only the scenario (a host)."""
        self.tmp = tempfile.mkdtemp(prefix=f"unbounded-sys-{name}-", dir=os.environ.get("UNBOUNDED_TEST_CACHE_TMP"))
        testcase.addCleanup(shutil.rmtree, self.tmp, True)
        self.image = os.path.join(self.tmp, "image")
        subprocess.run(["cp", "-a", "--reflink=auto", base or base_image(), self.image], check=True)
        if installed:
            r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", self.image],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"meson install into the image failed:\n{r.stdout}{r.stderr}")
        self._install_standins(real_containerd, scenario_only=not installed)
        os.makedirs(self.p("/var/log/journal"), exist_ok=True)  # persistent journal, read after shutdown
        self.binds = []
        self.init_args = []  # passed to systemd as PID 1 (systemd.setenv=..., as a kernel command line would)
        self.nspawn_env = {}
        self.namespace_setup = []  # shell commands run in the private mount namespace before nspawn
        self.nspawn_args = []      # more options of nspawn's own (--settings=trusted -M NAME)
        self.console = ""

    def p(self, path):
        return os.path.join(self.image, path.lstrip("/"))

    def host(self, rel):
        path = os.path.join(self.tmp, "host", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def _install_standins(self, real_containerd=False, scenario_only=False):
        wants = self.p("/etc/systemd/system/multi-user.target.wants")
        os.makedirs(wants, exist_ok=True)
        for unit in ("containerd.service", "kubelet.service", "nvidia-gridd.service", "unbounded-test-scenario.service"):
            if (unit == "containerd.service" and real_containerd) or (scenario_only and unit != "unbounded-test-scenario.service"):
                continue
            shutil.copy(os.path.join(STANDINS, unit), self.p("/etc/systemd/system"))
            os.symlink(f"/etc/systemd/system/{unit}", os.path.join(wants, unit))
        shutil.copy(os.path.join(STANDINS, "fake-nvidia-module.service"), self.p("/etc/systemd/system"))
        for script, dest in (("standin-record", "/usr/local/libexec/standin-record"),
                             ("fake-nvidia-gridd", "/usr/local/sbin/fake-nvidia-gridd")):
            os.makedirs(os.path.dirname(self.p(dest)), exist_ok=True)
            shutil.copy(os.path.join(STANDINS, script), self.p(dest))
            os.chmod(self.p(dest), 0o755)

    def bind(self, host_path, machine_path, read_only=False):
        self.binds.append(f"--bind{'-ro' if read_only else ''}={host_path}:{machine_path}")

    def write(self, path, content, mode=0o644):
        os.makedirs(os.path.dirname(self.p(path)), exist_ok=True)
        with open(self.p(path), "w") as f:
            f.write(content)
        os.chmod(self.p(path), mode)

    def enforce_device_rules(self):
        """Boots the machine as a Kubernetes node that runs containers with runc's systemd cgroup
        driver must be booted: with the unified cgroup hierarchy, where device rules are BPF programs,
        and bpf() allowed by nspawn's system call filter (runc loads its device program with it).
        This host has cgroup v1 (hybrid): there nspawn mounts the controllers read-only, runc's systemd
        driver cannot create its cgroups at all, and systemd's DevicePolicy= is not enforced."""
        self.nspawn_env["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
        self.binds.append("--system-call-filter=bpf")

    def fake_module(self, version_text):
        """Makes /proc/driver/nvidia/version in the machine read `version_text`; callable while it
        runs (the host loading another module)."""
        d = self.host("proc-driver/nvidia")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "version"), "w") as f:
            f.write(version_text)
        # ProtectKernelTunables= and ProtectControlGroups= give the sandboxed units a new /proc, where
        # a real module's /proc/driver/nvidia appears but this overmount does not: only these two
        # directives are switched off, and only for machines with a fake module.
        for unit in ("unbounded-nvidia-setup.service", "unbounded-nvidia-refresh.service"):
            self.write(f"/etc/systemd/system/{unit}.d/90-test-fake-module.conf",
                       "# System tests: see Machine.fake_module()\n[Service]\nProtectKernelTunables=no\nProtectControlGroups=no\n")
        link = self.p("/etc/systemd/system/sysinit.target.wants/fake-nvidia-module.service")
        if not os.path.lexists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink("/etc/systemd/system/fake-nvidia-module.service", link)
            os.makedirs(self.p("/var/lib/fake-proc-driver"), exist_ok=True)
            self.bind(os.path.dirname(d), "/var/lib/fake-proc-driver", read_only=True)

    def boot(self, scenario="", host_turns=(), timeout=BOOT_TIMEOUT):
        """Boots the machine, lets the scenario script run, and returns when it has powered off.
        `host_turns` are what the host does while the machine runs: the scenario hands the turn over
        with `host_turn N` (it waits until turn N, a callable run here, is done)."""
        self.write("/usr/local/libexec/scenario", SCENARIO_HEADER + scenario + "\n", 0o755)
        with open(BUILDER_LOCK, "a") as builder:  # images built ahead (tests/build-images.py) are done
            fcntl.flock(builder, fcntl.LOCK_SH)
        shutil.rmtree(self.p("/var/lib/standin"), ignore_errors=True)
        nspawn = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "--console=pipe",
                  "-D", self.image, *self.nspawn_args, "--boot", *self.binds, *self.init_args]
        cmd = " && ".join(["mount -t tmpfs tmpfs /run", *self.namespace_setup, "exec " + " ".join(f"'{a}'" for a in nspawn)])
        log = open(os.path.join(self.tmp, "console.log"), "w+")
        p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                             stdout=log, stderr=subprocess.STDOUT, text=True, env={**os.environ, **self.nspawn_env})
        deadline = time.monotonic() + timeout
        turns = list(host_turns)
        done = 0
        while p.poll() is None and time.monotonic() < deadline:
            if done < len(turns) and os.path.exists(self.p(f"/var/lib/standin/host-turn-{done + 1}")):
                turns[done]()
                done += 1
                with open(self.p(f"/var/lib/standin/host-done-{done}"), "w"):
                    pass
            time.sleep(0.1)
        if p.poll() is None:
            p.kill()
            p.wait()
            log.seek(0)
            raise AssertionError(f"machine did not power off within {timeout}s:\n{log.read()[-4000:]}")
        log.seek(0)
        self.console = log.read()
        log.close()
        if p.returncode != 0:
            raise AssertionError(f"systemd-nspawn exited with {p.returncode}:\n{self.console[-4000:]}")
        return self

    def read(self, path, default=None):
        try:
            with open(self.p(path)) as f:
                return f.read()
        except FileNotFoundError:
            if default is not None:
                return default
            raise AssertionError(f"{path} does not exist in the machine (console:\n{self.console[-3000:]})")

    def json(self, path):
        return json.loads(self.read(path))

    def journal(self, *match):
        """The machine's journal entries (all boots), optionally filtered by FIELD=value matches."""
        r = subprocess.run(["journalctl", "-D", self.p("/var/log/journal"), "--no-pager", "-o", "json", *match],
                           capture_output=True, text=True)
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def messages(self, *match):
        return [(int(e["__MONOTONIC_TIMESTAMP"]), e.get("_BOOT_ID"), e.get("MESSAGE", "")) for e in self.journal(*match)]
