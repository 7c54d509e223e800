#!/usr/bin/env python3
"""Builds the Debian package from a copy of the source tree with dpkg-buildpackage, checks its file
list and dependencies, and runs lintian, failing on any error or warning."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import main  # noqa: E402

SOURCE = os.environ["SOURCE_ROOT"]
EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected-files.txt")


def source_files():
    r = subprocess.run(["git", "-C", SOURCE, "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True)
    if r.returncode == 0:
        return r.stdout.splitlines()
    skip = ("build", ".git", "debian/.debhelper")
    out = []
    for dirpath, dirnames, filenames in os.walk(SOURCE):
        rel = os.path.relpath(dirpath, SOURCE)
        dirnames[:] = [d for d in dirnames if not os.path.join(rel, d).lstrip("./").startswith(skip)]
        out += [os.path.normpath(os.path.join(rel, f)) for f in filenames]
    return out


class TestPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-deb-")
        src = os.path.join(cls.tmp, "unbounded-nvidia-setup")
        for rel in source_files():
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            shutil.copy2(os.path.join(SOURCE, rel), os.path.join(src, rel), follow_symlinks=False)
        env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=%d" % os.cpu_count())
        for k in ("FIXTURE_DIR", "SETUP_BIN", "MESON_TEST_ITERATION"):
            env.pop(k, None)
        cls.build = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, capture_output=True, text=True, env=env)
        cls.deb = os.path.join(cls.tmp, "unbounded-nvidia-setup_0.1.0_%s.deb" %
                               subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_builds(self):
        self.assertEqual(self.build.returncode, 0, (self.build.stdout + self.build.stderr)[-5000:])
        self.assertTrue(os.path.exists(self.deb))

    def test_file_list(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        r = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True, check=True)
        files = sorted(line.split()[5].lstrip(".") for line in r.stdout.splitlines() if not line.startswith("d"))
        expected = sorted(l.strip() for l in open(EXPECTED) if l.strip())
        self.assertEqual(files, expected)

    def test_dependencies(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        depends = subprocess.run(["dpkg-deb", "-f", self.deb, "Depends"], capture_output=True, text=True, check=True).stdout
        for lib in ("libc6", "libmount1", "libsystemd0", "systemd"):
            self.assertIn(lib, depends)

    def test_lintian_reports_no_error_or_warning(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        self.assertIsNotNone(shutil.which("lintian"), "lintian is required (Debian package lintian)")
        r = subprocess.run(["lintian", "--tag-display-limit", "0", self.deb], capture_output=True, text=True)
        bad = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith(("E:", "W:"))]
        self.assertEqual(bad, [])


if __name__ == "__main__":
    main()
