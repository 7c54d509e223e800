"""A test machine: a copy of the image with the project installed (prefix /usr) and the stand-in
units, booted with systemd-nspawn in a private mount namespace with a tmpfs /run, fake staging bind
mounts, fake device nodes and a scenario script that runs once the machine is up and powers it off."""

import json
import os
import shutil
import subprocess
import tempfile

from image import SOURCE, base_image

BUILD = os.environ.get("BUILD_ROOT", os.path.join(SOURCE, "build"))
STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")
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
"""


class Machine:
    def __init__(self, testcase, name):
        self.tmp = tempfile.mkdtemp(prefix=f"unbounded-sys-{name}-", dir=os.environ.get("UNBOUNDED_TEST_CACHE_TMP"))
        testcase.addCleanup(shutil.rmtree, self.tmp, True)
        self.image = os.path.join(self.tmp, "image")
        subprocess.run(["cp", "-a", "--reflink=auto", base_image(), self.image], check=True)
        r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", self.image],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"meson install into the image failed:\n{r.stdout}{r.stderr}")
        self._install_standins()
        os.makedirs(self.p("/var/log/journal"), exist_ok=True)  # persistent journal, read after shutdown
        self.binds = []
        self.console = ""

    def p(self, path):
        return os.path.join(self.image, path.lstrip("/"))

    def host(self, rel):
        path = os.path.join(self.tmp, "host", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def _install_standins(self):
        wants = self.p("/etc/systemd/system/multi-user.target.wants")
        os.makedirs(wants, exist_ok=True)
        for unit in ("containerd.service", "kubelet.service", "nvidia-gridd.service", "unbounded-test-scenario.service"):
            shutil.copy(os.path.join(STANDINS, unit), self.p("/etc/systemd/system"))
            os.symlink(f"/etc/systemd/system/{unit}", os.path.join(wants, unit))
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

    def boot(self, scenario=""):
        """Boots the machine, lets the scenario script run, and returns when it has powered off."""
        self.write("/usr/local/libexec/scenario", SCENARIO_HEADER + scenario + "\n", 0o755)
        shutil.rmtree(self.p("/var/lib/standin"), ignore_errors=True)
        nspawn = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "--console=pipe",
                  "-D", self.image, "--boot", *self.binds]
        cmd = "mount -t tmpfs tmpfs /run && exec " + " ".join(f"'{a}'" for a in nspawn)
        try:
            r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                               capture_output=True, text=True, timeout=BOOT_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"machine did not power off within {BOOT_TIMEOUT}s:\n{(e.stdout or b'')[-4000:]}")
        self.console = r.stdout + r.stderr
        if r.returncode != 0:
            raise AssertionError(f"systemd-nspawn exited with {r.returncode}:\n{self.console[-4000:]}")
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
