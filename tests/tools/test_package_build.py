#!/usr/bin/env python3
"""The package tier's single-flight build (unbounded_tests/package_build.py), which CI starts ahead
and the tier takes: a build under way is waited for and taken, never made twice; a build of other
files, or with the other warnings flag, is never taken, so the tier cannot pass on a stale package;
a failed build is made again by the next caller (the one made ahead may have failed for its
environment). The chroot build itself is replaced by a stand-in that
records its calls."""

import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

from unbounded_tests import package_build
from unbounded_tests.harness import main


class TestBuildOnce(unittest.TestCase):
    def setUp(self):
        self.source = tempfile.mkdtemp(prefix="unbounded-source-")
        self.dir = tempfile.mkdtemp(prefix="unbounded-ahead-")
        self.addCleanup(shutil.rmtree, self.source, True)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.write("meson.build", "project('x')\n")
        self.calls = []
        self.returncode = 0
        self.started, self.release = threading.Event(), threading.Event()
        self.release.set()
        for name, value in (("SOURCE", self.source), ("build", self.fake_build),
                            ("source_files", lambda: sorted(os.listdir(self.source)))):
            patcher = mock.patch.object(package_build, name, value)
            patcher.start()
            self.addCleanup(patcher.stop)
        env = mock.patch.dict(os.environ, {"WERROR": "true", "CRI_API_PROTO": ""})
        env.start()
        self.addCleanup(env.stop)

    def write(self, name, text):
        with open(os.path.join(self.source, name), "w") as f:
            f.write(text)

    def fake_build(self, work, files, proto):
        self.calls.append(work)
        with open(os.path.join(work, "x.deb"), "w") as f:
            f.write(str(len(self.calls)))
        self.started.set()
        self.release.wait(10)
        return {"returncode": self.returncode, "log": f"build {len(self.calls)}", "message": "built"}

    def test_a_build_under_way_is_waited_for_and_taken(self):
        self.release.clear()
        results = {}
        first = threading.Thread(target=lambda: results.update(first=package_build.build_once(self.dir)))
        second = threading.Thread(target=lambda: results.update(second=package_build.build_once(self.dir)))
        first.start()
        self.assertTrue(self.started.wait(10))
        second.start()
        second.join(0.5)
        self.assertTrue(second.is_alive(), "the second caller did not wait for the build under way")
        self.release.set()
        first.join(10)
        second.join(10)
        self.assertEqual(len(self.calls), 1)
        (r1, work1, taken1), (r2, work2, taken2) = results["first"], results["second"]
        self.assertEqual((taken1, taken2), (False, True))
        self.assertEqual((r1, work1), (r2, work2))
        self.assertEqual(open(os.path.join(work2, "x.deb")).read(), "1")

    def test_a_build_of_other_files_is_not_taken(self):
        package_build.build_once(self.dir)
        for change in (lambda: self.write("meson.build", "project('y')\n"), lambda: self.write("new.cpp", ""),
                       lambda: os.chmod(os.path.join(self.source, "new.cpp"), 0o755)):
            change()
            result, work, taken = package_build.build_once(self.dir)
            self.assertFalse(taken)
            self.assertEqual(open(os.path.join(work, "x.deb")).read(), str(len(self.calls)))
        self.assertEqual(len(self.calls), 4)
        self.assertTrue(package_build.build_once(self.dir)[2])

    def test_a_build_with_the_other_warnings_flag_or_proto_is_not_taken(self):
        package_build.build_once(self.dir)
        with mock.patch.dict(os.environ, {"WERROR": "false"}):
            self.assertFalse(package_build.build_once(self.dir)[2])
        proto = os.path.join(self.dir, "api.proto")
        with open(proto, "w") as f:
            f.write("syntax = 'proto3';\n")
        link = os.path.join(self.dir, "api-link.proto")
        os.symlink(proto, link)
        with mock.patch.dict(os.environ, {"CRI_API_PROTO": link}):
            self.assertFalse(package_build.build_once(self.dir)[2])
            self.assertTrue(package_build.build_once(self.dir)[2])
            with open(proto, "w") as f:
                f.write("syntax = 'proto2';\n")
            self.assertFalse(package_build.build_once(self.dir)[2])
        self.assertEqual(len(self.calls), 4)

    def test_a_failed_build_is_made_again_by_the_next_caller(self):
        self.returncode = 2
        package_build.build_once(self.dir)
        result, _, taken = package_build.build_once(self.dir)
        self.assertFalse(taken)
        self.assertEqual((result["returncode"], result["log"]), (2, "build 2"))
        self.returncode = 0
        result, _, taken = package_build.build_once(self.dir)
        self.assertEqual((taken, result["returncode"], len(self.calls)), (False, 0, 3))
        self.assertTrue(package_build.build_once(self.dir)[2])


class TestSourceFiles(unittest.TestCase):
    """The files of a work tree as git knows them: a tracked file deleted in the tree is not listed
    (it has nothing to copy), and a name git would quote comes back as it is."""

    def test_a_deleted_tracked_file_and_an_odd_name(self):
        source = tempfile.mkdtemp(prefix="unbounded-git-")
        self.addCleanup(shutil.rmtree, source, True)
        for name in ("kept.cpp", "gone.cpp", 'odd "name" \u00e9.txt'):
            with open(os.path.join(source, name), "w") as f:
                f.write(name)
        git = ["git", "-C", source, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-qm", "x"], check=True)
        os.unlink(os.path.join(source, "gone.cpp"))
        with open(os.path.join(source, "untracked.cpp"), "w") as f:
            f.write("")
        with mock.patch.object(package_build, "SOURCE", source):
            files = package_build.source_files()
            self.assertEqual(sorted(files), sorted(["kept.cpp", 'odd "name" \u00e9.txt', "untracked.cpp"]))
            package_build.source_key(files, "")

    def test_without_git_the_tree_is_walked(self):
        source = tempfile.mkdtemp(prefix="unbounded-nogit-")
        self.addCleanup(shutil.rmtree, source, True)
        for name in ("meson.build", "lib/a.cpp", "build/x.o", ".git/HEAD"):
            os.makedirs(os.path.dirname(os.path.join(source, name)), exist_ok=True)
            with open(os.path.join(source, name), "w") as f:
                f.write(name)
        with mock.patch.object(package_build, "SOURCE", source), \
                mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
            self.assertEqual(sorted(package_build.source_files()), ["lib/a.cpp", "meson.build"])


if __name__ == "__main__":
    main()
