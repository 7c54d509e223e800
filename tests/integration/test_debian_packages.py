#!/usr/bin/env python3
"""Issue 14: an arm64 host whose driver is Debian's real NVIDIA 535 packages (non-free, fetched by
tests/cross/setup-arm64.sh into the build directory), laid out like a Debian arm64 host's multiarch lib
dir with real unrelated arm64 libraries mixed in, through the arm64 binaries under qemu-user."""

import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests import cdi_schema
from unbounded_tests.harness import ARCH, MachineRoot, main, write

DEBS = os.environ.get("DEBIAN_NVIDIA_DEBS", "")
HOST_LIBDIR = f"/usr/lib/{ARCH}"
# Real arm64 libraries of an arm64 host's lib dir that are not the driver's (from the :arm64
# packages make check-arm64 installed).
UNRELATED = ["libstdc++.so.6", "libmount.so.1", "libsystemd.so.0", "libc.so.6"]


def elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    return int.from_bytes(head[18:20], "little")


class TestDebianArm64Packages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        debs = sorted(glob.glob(os.path.join(DEBS, "*.deb")))
        if len(debs) != 9:  # loud, never a skip: make check-arm64 fetches them
            raise RuntimeError(f"Debian's arm64 NVIDIA packages are missing in {DEBS!r}: run make check-arm64")
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-debs-")
        cls.tree = os.path.join(cls.tmp, "packages")
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", deb, cls.tree], check=True)
        cls.version = os.path.basename(glob.glob(os.path.join(cls.tree, f"usr/lib/{ARCH}/nvidia/current/libcuda.so.*.*"))[0])[len("libcuda.so."):]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def machine(self):
        """The host binds its lib dir at /run/host-nvidia/0 and nvidia-smi's dir at 1; the SONAME links
        in the lib dir are absolute, into nvidia/current/, as Debian's alternatives resolve them."""
        m = MachineRoot(self)
        lib = m.p("/run/host-nvidia/0")
        shutil.copytree(os.path.join(self.tree, HOST_LIBDIR.lstrip("/")), lib, symlinks=True)
        cur = os.path.join(lib, "nvidia", "current")
        for name in os.listdir(cur):
            if os.path.islink(os.path.join(cur, name)):
                os.symlink(f"{HOST_LIBDIR}/nvidia/current/{name}", os.path.join(lib, name))
        for name in UNRELATED:
            real = os.path.realpath(os.path.join(HOST_LIBDIR, name))
            shutil.copy(real, os.path.join(lib, os.path.basename(real)))
            if os.path.basename(real) != name:
                os.symlink(os.path.basename(real), os.path.join(lib, name))
        shutil.copytree(os.path.join(self.tree, "usr/lib/nvidia/current"), m.p("/run/host-nvidia/1"))
        m.set_proc_version(self.version)
        m.add_control_nodes()
        m.add_gpu(0, "0009:01:00.0", "GPU-3f1c0a52-8e4b-4d0e-9c1a-2b7e6d5f4a10", model="NVIDIA GH200 480GB")
        return m

    def test_setup_builds_an_arm64_root_and_verify_is_ready(self):
        m = self.machine()
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["driver_version"], self.version)
        libdir = m.p(f"/run/nvidia/driver/lib/{ARCH}")
        v = self.version
        for name in (f"libEGL_nvidia.so.{v}", f"libcuda.so.{v}", f"libnvidia-ml.so.{v}", f"libGLX_nvidia.so.{v}",
                     f"libnvidia-ptxjitcompiler.so.{v}", f"libnvidia-eglcore.so.{v}", f"libnvidia-glcore.so.{v}"):
            path = os.path.join(libdir, name)
            self.assertTrue(os.path.isfile(path) and not os.path.islink(path), name)
            self.assertEqual(elf_machine(path), 183, f"{name} is not EM_AARCH64")
        for link, target in (("libcuda.so.1", f"libcuda.so.{v}"), ("libnvidia-ml.so.1", f"libnvidia-ml.so.{v}"),
                             ("libEGL_nvidia.so.0", f"libEGL_nvidia.so.{v}"), ("libGLX_nvidia.so.0", f"libGLX_nvidia.so.{v}"),
                             ("libnvidia-ptxjitcompiler.so.1", f"libnvidia-ptxjitcompiler.so.{v}")):
            self.assertEqual(os.readlink(os.path.join(libdir, link)), target, link)
        for name in os.listdir(libdir):
            self.assertFalse(name.startswith(("libstdc++", "libmount", "libsystemd", "libc.so")), f"{name} taken")
        self.assertEqual(elf_machine(m.p("/run/nvidia/driver/bin/nvidia-smi")), 183)

        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            spec = f.read()
        self.assertEqual(cdi_schema.errors(spec), [])
        self.assertNotIn("x86_64", spec)
        self.assertIn(f"/lib/{ARCH}/libcuda.so.{v}", spec)
        self.assertIn(f"NVIDIA_CTK_LIBCUDA_DIR=/lib/{ARCH}", spec)

        r = m.run("--json", "verify")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(json.loads(r.stdout)["ready"])


if __name__ == "__main__":
    main()
