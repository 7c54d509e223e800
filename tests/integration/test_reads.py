#!/usr/bin/env python3
"""Issue 35: one run of setup or refresh reads the machine once. The kernel module's version file, the
live driver root's manifest, each spec file the configuration names and the devices the specs are made
for (/proc/devices, the GPU's information file) are opened exactly once per run, under strace, through
the real binary on a fake machine root; also when the copies run out of room and the run plans again.

Why exactly once: what a run decides from (which driver may be live, whether the root and the specs
change) must be the state it read, not a second look that can differ from the first when the host
changes it in between (a module reload, a pod writing /var/run/cdi); and every extra read is time on
the boot path. The run reads them at its start (the snapshot) and hands what it read down; what it
writes afterwards it knows without reading it back.

Exactly once, each of them, in every run below (verify too, in its own run), with one exception: the first setup finds no live
root, so there is no manifest to read (0), and the manifest it writes it does not read back. Once
the module was read twice per run (setup, then the live-state check), the manifest up to
three times (the decision, the install, the final check) and each spec file up to three times (the
unchanged-bytes test, the final check, the consumer check).

What counts as an open of a file F: an open, openat or openat2 without O_PATH (an O_PATH descriptor
cannot read) that returned a descriptor of F (strace -y decodes it), or that failed naming F (a file
that is not there yet is still a read attempt). The manifest written into a new tree before the swap
is not the live root's manifest: it is created in the temp tree under its own name (O_CREAT|O_EXCL).
"""

import json
import os
import re
import shutil
import subprocess
import unittest

from unbounded_tests.harness import (IS_ROOT, PLUGIN_SPEC, SETUP, V1, V2, MachineRoot, fixture, main, pe_image, plugin_spec,
                                     preload_env, write)

SPECS = ("/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia-imex-channel.yaml", "/etc/cdi/nvidia-nvswitch.yaml",
         "/etc/cdi/nvidia-gdrcopy.yaml", "/etc/cdi/nvidia-gds.yaml", PLUGIN_SPEC)
MODULE = "/proc/driver/nvidia/version"
MANIFEST = "/run/nvidia/driver/.unbounded-manifest.json"
# The devices the specs are made for: /proc/devices (every node's major is checked against it) and
# the GPU's information file stand for the whole device read (devices, MIG, IMEX, fabric, IPC).
DEVICES = ("/proc/devices", "/proc/driver/nvidia/gpus/0000:18:00.0/information")
MIB = 1024 * 1024

# 1234 openat(5</tmp/x/run/nvidia/driver>, ".unbounded-manifest.json", O_RDONLY|O_CLOEXEC) = 6</tmp/x/...>
CALL = re.compile(r'^(?:\d+\s+)?(open|openat|openat2)\((.*)\)\s+=\s+(-?\d+)(?:<([^>]*)>)?')
DIRFD = re.compile(r'^(AT_FDCWD|-?\d+)(?:<([^>]*)>)?, ')
NAME = re.compile(r'"((?:[^"\\]|\\.)*)"')


class ReadOnce(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.assertIsNotNone(shutil.which("strace"), "strace is required (Debian package strace): make check installs it")
        self.m = MachineRoot(self)
        self.m.standard(V1)
        self.m.add_imex_channels([0, 1])  # a side spec that is written, and three that are not there
        self.m.config("refresh:\n  settle_time: 0s\n")
        write(self.m.p(PLUGIN_SPEC), plugin_spec(self.m, V1))
        self.root = os.path.realpath(self.m.path)
        # LeakSanitizer cannot run under ptrace (the sanitizer tier).
        self.env = dict(os.environ)
        if "ASAN_OPTIONS" in self.env:
            self.env["ASAN_OPTIONS"] = self.env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")

    def opens(self, *args, tmpfs=None, env=None):
        """Runs the binary under strace; returns {machine path: opens} for the files counted. `tmpfs`: a
        directory of the machine that gets a 16 MiB tmpfs of its own (a private mount namespace)."""
        log = os.path.join(self.root, "strace.log")
        # `env` (a shim's preload) goes to the traced binary only, not to strace, unshare or sh.
        traced_env = [a for k, v in (env or {}).items() for a in ("-E", f"{k}={v}")]
        cmd = ["strace", "-f", "-y", "-qq", "-o", log, "-e", "trace=open,openat,openat2", *traced_env,
               SETUP, "--root", self.root, *args]
        if tmpfs:
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   'mount -t tmpfs -o size=16m tmpfs "$0" && exec "$@"', self.m.p(tmpfs), *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=self.root, timeout=120)
        self.assertEqual(r.returncode, 0, f"{args}: {r.stderr[-2000:]}")
        self.last = r
        counted = {self.root + p: p for p in (MODULE, MANIFEST, *SPECS, *DEVICES)}
        counts = dict.fromkeys(counted.values(), 0)
        with open(log) as f:
            text = f.read()
        os.unlink(log)
        for line in text.splitlines():
            c = CALL.match(line)
            if not c or "O_PATH" in c.group(2):
                continue
            if int(c.group(3)) >= 0:
                target = c.group(4)
            else:
                target = self.named(c.group(1), c.group(2))
            if target in counted:
                counts[counted[target]] += 1
        return counts

    def named(self, call, args):
        """The absolute path a failed open named."""
        dirfd = self.root
        if call != "open":
            d = DIRFD.match(args)
            if not d:
                return None
            if d.group(1) != "AT_FDCWD":
                dirfd = d.group(2)
            args = args[d.end():]
        n = NAME.match(args)
        if not n or dirfd is None:
            return None
        name = n.group(1)
        return os.path.normpath(name if name.startswith("/") else os.path.join(dirfd, name))

    def assertOnce(self, what, counts, **exceptions):
        expected = dict.fromkeys(counts, 1)
        expected.update(exceptions)
        self.assertEqual(counts, expected, f"{what}: opens per file")

    def test_each_run_reads_each_file_once(self):
        self.assertOnce("first setup", self.opens("setup"), **{MANIFEST: 0})
        self.assertOnce("unchanged setup", self.opens("setup"))
        # verify reads what it needs once per its own run, and changes nothing.
        self.assertOnce("verify", self.opens("verify"))
        self.assertOnce("refresh, nothing changed", self.opens("refresh"))
        # The host upgrades userspace and loads the new module: the refresh builds and swaps a root.
        self.m.clear_staging()
        self.m.stage_all(V2)
        self.m.set_proc_version(V2)
        self.assertOnce("refresh to a new driver", self.opens("refresh"))
        with open(self.m.p("/etc/cdi/nvidia.yaml")) as f:
            self.assertIn(f"libcuda.so.{V2}", f.read())

    @unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private tmpfs")
    def test_a_retry_after_enospc_plans_from_the_same_read(self):
        """The copies run out of room after the estimate said they fit (another writer filled /run; here
        statfs() says there is room on a 16 MiB tmpfs): setup leaves the optional files out, plans the
        specs again and installs once more, from what it read at its start. Before the snapshot held the
        devices, the second plan read them again (/proc/devices and the GPU's information twice)."""
        lib = self.m.p("/run/host-nvidia/0")
        shutil.copy(fixture(f"libnvoptix.so.{V1}"), lib)  # nvoptix.bin is OptiX's data
        os.symlink(f"libnvoptix.so.{V1}", os.path.join(lib, "libnvoptix.so.1"))
        write(os.path.join(lib, "nvidia/wine/nvngx.dll"), pe_image(b"\x01" * (9 * MIB)))
        write(self.m.p("/run/host-nvidia/3/nvoptix.bin"), b"\x7a\xda" * (9 * MIB // 2))
        os.makedirs(self.m.p("/run/nvidia"), exist_ok=True)
        counts = self.opens("--json", "setup", tmpfs="/run/nvidia", env=preload_env(fixture("roomy_statfs_shim.so")))
        result = json.loads(self.last.stdout)
        self.assertEqual(result["outcome"], "ready")
        left = sorted(os.path.basename(p) for p in result.get("optional_left_out", []))
        self.assertEqual(left, ["nvngx.dll", "nvoptix.bin"], result.get("warnings"))
        self.assertTrue(any("No space left on device" in w for w in result["warnings"]), result["warnings"])
        self.assertOnce("setup retried after ENOSPC", counts, **{MANIFEST: 0})


if __name__ == "__main__":
    main()
