"""The base of the setup tests (test_setup.py, test_hostile.py): the standard machine, and the complete
driver root setup must build from it, file by file and link by link."""

import os
import stat
import unittest

from .harness import ARCH, COMPANIONS, DRIVER_LIBS, HELPERS, VDPAU_LIBS, MachineRoot, fixture


def expected_files(version):
    files = {f"lib/{ARCH}/{lib}.so.{version}" for lib in DRIVER_LIBS}
    files |= {f"lib/{ARCH}/vdpau/{lib}.so.{version}" for lib in VDPAU_LIBS}
    files |= {f"lib/{ARCH}/{name}" for name in COMPANIONS}
    files |= {f"bin/{h}" for h in HELPERS}
    files |= {f"lib/firmware/nvidia/{version}/{n}" for n in ("gsp_ga10x.bin", "gsp_tu10x.bin")}
    return files


def expected_links(version):
    links = {f"lib/{ARCH}/{soname}": f"{lib}.so.{version}" for lib, soname in DRIVER_LIBS.items() if soname}
    links |= {f"lib/{ARCH}/vdpau/{soname}": f"{lib}.so.{version}" for lib, soname in VDPAU_LIBS.items()}
    links |= {f"lib/{ARCH}/{soname}": name for name, soname in COMPANIONS.items()}
    links[f"lib/{ARCH}/libcuda.so"] = "libcuda.so.1"
    links[f"lib/{ARCH}/gbm/nvidia-drm_gbm.so"] = "../libnvidia-allocator.so.1"
    return links


class SetupTestCase(unittest.TestCase):
    def machine(self, **kw):
        return MachineRoot(self).standard(**kw)

    def assertSetupOk(self, r):
        self.assertEqual(r.returncode, 0, f"setup failed: rc={r.returncode}\nstderr:\n{r.stderr}\nstdout:\n{r.stdout}")
        self.assertIsNotNone(r.result, "no JSON on stdout")
        self.assertTrue(r.result["ready"])

    def assertCompleteRoot(self, m, version, extra_files=(), extra_links=None):
        root = m.driver_root()
        st = os.lstat(root)
        self.assertTrue(stat.S_ISDIR(st.st_mode), "driver root must be a real directory")
        files, links = set(), {}
        for dirpath, dirnames, filenames in os.walk(root):
            for name in filenames + dirnames:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                s = os.lstat(full)
                if stat.S_ISLNK(s.st_mode):
                    links[rel] = os.readlink(full)
                elif stat.S_ISREG(s.st_mode):
                    files.add(rel)
                    self.assertEqual(s.st_mode & 0o7000, 0, f"{rel} has a setuid/setgid/sticky bit")
        files.discard(".unbounded-manifest.json")
        self.assertEqual(files, expected_files(version) | set(extra_files))
        self.assertEqual(links, {**expected_links(version), **(extra_links or {})})
        for rel, target in links.items():
            self.assertFalse(target.startswith("/"), f"{rel} -> {target} is absolute")
            resolved = os.path.realpath(os.path.join(root, rel))
            self.assertTrue(resolved.startswith(os.path.realpath(root) + "/"), f"{rel} resolves outside the root")
            self.assertTrue(os.path.isfile(resolved), f"{rel} -> {target} dangles")
        for lib in ("libcuda", "libnvidia-ml"):
            dest = os.path.join(m.libdir(), f"{lib}.so.{version}")
            self.assertTrue(stat.S_ISREG(os.lstat(dest).st_mode))
            with open(dest, "rb") as a, open(fixture(f"{lib}.so.{version}"), "rb") as b:
                self.assertEqual(a.read()[: os.path.getsize(fixture(f"{lib}.so.{version}"))], b.read())
        for rel in expected_files(version):
            mode = stat.S_IMODE(os.lstat(os.path.join(root, rel)).st_mode)
            self.assertEqual(mode, 0o755 if rel.startswith("bin/") else 0o644, rel)
