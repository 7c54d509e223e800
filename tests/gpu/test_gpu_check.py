#!/usr/bin/env python3
"""make gpu-check on a machine without an NVIDIA GPU and driver says so and exits 2, never passing; here
on a host root (GPU_CHECK_HOST_ROOT) that has no driver, one with a module but no GPU, and one with GPUs
but no /dev/nvidiactl."""

import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check.py")


class TestWithoutGpu(unittest.TestCase):
    def check(self, root):
        env = dict(os.environ, GPU_CHECK_HOST_ROOT=root)
        return subprocess.run([sys.executable, CHECK, os.environ.get("GPU_CHECK_BUILD", "build")], capture_output=True,
                              text=True, env=env)

    def write(self, root, rel, text=""):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def test_no_module(self):
        with tempfile.TemporaryDirectory() as root:
            r = self.check(root)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("\n"), 1)
            self.assertTrue(r.stdout.startswith("gpu-check: no GPU: /proc/driver/nvidia/version is missing"), r.stdout)

    def test_module_without_nvidiactl(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03\n")
            r = self.check(root)
            self.assertEqual(r.returncode, 2)
            self.assertIn("/dev/nvidiactl is missing", r.stdout)

    def test_module_without_gpus(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03\n")
            self.write(root, "dev/nvidiactl")
            os.makedirs(os.path.join(root, "proc/driver/nvidia/gpus"))
            r = self.check(root)
            self.assertEqual(r.returncode, 2)
            self.assertIn("lists no GPU", r.stdout)


if __name__ == "__main__":
    from unbounded_tests.harness import main
    main()
