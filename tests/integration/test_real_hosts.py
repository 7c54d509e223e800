#!/usr/bin/env python3
"""Issue 24: hosts as they really are, built from Debian's real NVIDIA packages (bookworm 535 with OpenCL and
NVVM, its i386 libraries and GSP firmware, the tesla-535 flavour, trixie's 550), laid out as each host family
installs them (debian_hosts.py), and bound into the machine the way the README's host recipes say. One case
per recipe row, and one per way a real host failed before."""

import contextlib
import json
import os
import shutil
import tempfile
import unittest

import yaml

from unbounded_tests import cdi_schema
from unbounded_tests import debian_hosts as dh
from unbounded_tests import host_snapshots
from unbounded_tests.harness import ARCH, fixture, main, no_openat2


def envs():
    """Each case with openat2 and with it forced absent (no_openat2_shim.so), as the units' sandbox runs the
    binary: the answers must not depend on which path walk resolved the paths."""
    return (("openat2", None), ("openat2 forced absent", no_openat2()))


@contextlib.contextmanager
def labelled(label):
    """Not subTest(): the TAP result reports only whole tests, and a failing subtest would vanish."""
    try:
        yield
    except AssertionError as e:
        raise AssertionError(f"[{label}] {e}") from e

LIB = "/usr/lib/x86_64-linux-gnu"
LIB32 = "/usr/lib/i386-linux-gnu"
UUIDS = host_snapshots.UUIDS


def version_in(host, flavour="current"):
    return host_snapshots.version_in(host, flavour)


def elf_class(path):
    with open(path, "rb") as f:
        return f.read(5)[4]  # 1: 32-bit, 2: 64-bit


class RealHostCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if ARCH != "x86_64-linux-gnu":
            raise RuntimeError(f"these hosts are amd64 ones; this build is for {ARCH}")
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-hosts-")
        cls.bookworm = dh.HostTree(os.path.join(cls.tmp, "bookworm"))
        for s in ("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware"):
            dh.install_debian(cls.bookworm, s)
        cls.tesla = dh.HostTree(os.path.join(cls.tmp, "tesla"))
        dh.install_debian(cls.tesla, "bookworm-tesla-535")
        cls.trixie = dh.HostTree(os.path.join(cls.tmp, "trixie"))
        dh.install_debian(cls.trixie, "trixie-550")
        cls.v535 = version_in(cls.bookworm)
        cls.vtesla = version_in(cls.tesla, "tesla-535")
        cls.v550 = version_in(cls.trixie)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def machine(self, host, binds, version, gpus=1):
        return host_snapshots.machine(self, host, binds, version, gpus)

    def setup_ready(self, m, version):
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["driver_version"], version)
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            self.assertEqual(cdi_schema.errors(f.read()), [])
        self.assertRefreshBuildsTheSame(m, r)
        return r

    def assertRefreshBuildsTheSame(self, m, setup, env=None):
        """A refresh reads staging through its settle walk (staging_quiet.hpp), not as setup does: on every
        real layout, with nothing memoised, it must build the root and spec setup built, in one pass, and say
        the same. Setup's root, spec and run directory are put back afterwards, for the test's own checks."""
        spec = m.p("/etc/cdi/nvidia.yaml")
        manifest = os.path.join(m.driver_root(), ".unbounded-manifest.json")
        with open(manifest) as f, open(spec) as g:
            built = (json.load(f)["entries"], g.read())
        config = m.p("/etc/unbounded/nvidia.yaml")
        before = open(config).read() if os.path.exists(config) else None
        run_dir = m.p("/run/unbounded-nvidia")
        aside = {path: path + ".of-setup" for path in (m.driver_root(), spec, run_dir)}
        refreshed = None
        try:
            for path, kept in aside.items():
                os.rename(path, kept)
            os.mkdir(run_dir, 0o755)
            m.config((before or "") + "\nrefresh:\n  settle_time: 0s\n")
            r = m.run("--json", "refresh", env=env)
            if r.returncode == 0:
                with open(manifest) as f, open(spec) as g:
                    refreshed = (json.load(f)["entries"], g.read())
        finally:
            if before is None:
                if os.path.exists(config):
                    os.unlink(config)
            else:
                m.config(before)
            for path, kept in aside.items():
                if not os.path.lexists(kept):
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                elif os.path.lexists(path):
                    os.unlink(path)
                os.rename(kept, path)
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        self.assertEqual(result["passes"], 1, result)
        self.assertEqual(refreshed, built)
        self.assertEqual(sorted(self.warnings(result)), sorted(self.warnings(setup.result)))

    @staticmethod
    def warnings(result):
        # The test roots live on the test machine's disk, not on tmpfs as /run is in a machine.
        return [w for w in result["warnings"] if "expected tmpfs" not in w]

    def verify(self, m):
        r = m.run("--json", "verify")
        return r.returncode, json.loads(r.stdout)

    def assertRegularCopy(self, m, name, source, arch=ARCH):
        path = os.path.join(m.driver_root(), "lib", arch, name)
        self.assertTrue(os.path.isfile(path) and not os.path.islink(path), f"{name} is not in the root")
        with open(path, "rb") as a, open(source, "rb") as b:
            self.assertEqual(a.read(), b.read(), name)


class TestDebian(RealHostCase):
    def test_readme_binds_with_nvvm_installed_are_not_fatal(self):
        """Item 1: libnvidia-nvvm.so.<v> -> /etc/alternatives/... in the lib dir; the real file is found in
        nvidia/current/, the entry is skipped with a note naming it and why; verify carries the nvidia-smi
        warning (item 4)."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/usr/bin", "/lib/firmware/nvidia"], v)
        link = m.p(f"/run/host-nvidia/0/libnvidia-nvvm.so.{v}")
        self.assertEqual(os.readlink(link), f"/etc/alternatives/nvidia--libnvidia-nvvm.so.{v}-x86_64-linux-gnu")
        r = self.setup_ready(m, v)
        self.assertRegularCopy(m, f"libnvidia-nvvm.so.{v}", self.bookworm.p(f"{LIB}/nvidia/current/libnvidia-nvvm.so.{v}"))
        self.assertRegularCopy(m, f"libnvidia-opencl.so.{v}", self.bookworm.p(f"{LIB}/nvidia/current/libnvidia-opencl.so.{v}"))
        self.assertEqual(os.readlink(os.path.join(m.libdir(), "libnvidia-nvvm.so.4")), f"libnvidia-nvvm.so.{v}")
        notes = [n for n in r.result["notes"] if f"/run/host-nvidia/0/libnvidia-nvvm.so.{v}" in n]
        self.assertEqual(len(notes), 1, r.result["notes"])
        self.assertIn("/etc/alternatives/nvidia--libnvidia-nvvm", notes[0])
        self.assertIn(f"taken from /run/host-nvidia/0/nvidia/current/libnvidia-nvvm.so.{v}", notes[0])
        # /usr/bin/nvidia-smi is an alternatives link too, and its real file is not bound: said, with what to bind
        smi = [w for w in self.warnings(r.result) if "nvidia-smi" in w]
        self.assertEqual(len(smi), 1, r.result["warnings"])
        self.assertIn("bind the host's /usr/lib/nvidia/current", smi[0])
        self.assertFalse(os.path.exists(os.path.join(m.driver_root(), "bin", "nvidia-smi")))
        rc, j = self.verify(m)
        self.assertEqual(rc, 0, j)
        self.assertTrue(j["ready"])
        self.assertIn(smi[0], j["warnings"])
        self.assertEqual(j["last_run"]["command"], "setup")

    def test_trixie_550_with_the_readme_binds(self):
        v = self.v550
        m = self.machine(self.trixie, [LIB, "/usr/bin"], v)
        r = self.setup_ready(m, v)
        self.assertRegularCopy(m, f"libnvidia-nvvm.so.{v}", self.trixie.p(f"{LIB}/nvidia/current/libnvidia-nvvm.so.{v}"))
        self.assertTrue(any(f"libnvidia-nvvm.so.{v}" in n for n in r.result["notes"]), r.result["notes"])

    def test_recipe_lib_dir_and_the_nvidia_smi_dir(self):
        """The README's Debian recipe: the lib dir, /usr/lib/nvidia/current and the firmware. Nothing missing,
        nothing warned about."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/usr/lib/nvidia/current", "/lib/firmware/nvidia"], v)
        r = self.setup_ready(m, v)
        self.assertEqual(self.warnings(r.result), [])
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), "bin", "nvidia-smi")))
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), f"lib/firmware/nvidia/{v}/gsp_ga10x.bin")))
        for name in (f"libnvidia-glcore.so.{v}", f"libnvidia-eglcore.so.{v}", f"libnvidia-glsi.so.{v}", f"libnvidia-tls.so.{v}",
                     f"libEGL_nvidia.so.{v}", f"libGLX_nvidia.so.{v}", f"libcuda.so.{v}", f"libnvidia-ml.so.{v}"):
            self.assertTrue(os.path.isfile(os.path.join(m.libdir(), name)), name)
        rc, j = self.verify(m)
        self.assertEqual((rc, [w for w in j["warnings"] if "expected tmpfs" not in w]), (0, []))

    def test_nvidia_current_bound_beside_the_lib_dir(self):
        """'even when nvidia/current, which holds the real file, is bound too'."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, f"{LIB}/nvidia/current", "/usr/lib/nvidia/current"], v)
        self.setup_ready(m, v)
        self.assertRegularCopy(m, f"libnvidia-nvvm.so.{v}", self.bookworm.p(f"{LIB}/nvidia/current/libnvidia-nvvm.so.{v}"))

    def test_recipe_with_the_alternatives_directory(self):
        """/etc/alternatives bound: the lib dir's links resolve through it, /usr/bin/nvidia-smi too."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/etc/alternatives", "/usr/bin", "/usr/lib/nvidia/current", "/lib/firmware/nvidia"], v)
        r = self.setup_ready(m, v)
        self.assertEqual(self.warnings(r.result), [])
        self.assertEqual(r.result["notes"], [])
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), "bin", "nvidia-smi")))
        self.assertRegularCopy(m, f"libnvidia-nvvm.so.{v}", self.bookworm.p(f"{LIB}/nvidia/current/libnvidia-nvvm.so.{v}"))

    def test_nvidia_smi_through_alternatives_names_the_unbound_directory(self):
        """/usr/bin and /etc/alternatives bound, /usr/lib/nvidia/current not: the warning says what to bind, not
        'Too many levels of symbolic links' (the walk found /usr/bin/nvidia-smi itself again)."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/usr/bin", "/etc/alternatives"], v)
        r = self.setup_ready(m, v)
        smi = [w for w in self.warnings(r.result) if "nvidia-smi" in w]
        self.assertEqual(len(smi), 1, r.result["warnings"])
        self.assertNotIn("Too many levels", smi[0])
        self.assertIn("bind the host's /usr/lib/nvidia/current", smi[0])

    def test_i386_libraries(self):
        v = self.v535
        m = self.machine(self.bookworm, [LIB, LIB32, "/usr/lib/nvidia/current", "/lib/firmware/nvidia"], v)
        r = self.setup_ready(m, v)
        self.assertEqual(self.warnings(r.result), [])
        self.assertRegularCopy(m, f"libcuda.so.{v}", self.bookworm.p(f"{LIB32}/nvidia/current/libcuda.so.{v}"), arch="i386-linux-gnu")
        self.assertEqual(elf_class(os.path.join(m.driver_root(), f"lib/i386-linux-gnu/libcuda.so.{v}")), 1)
        self.assertEqual(os.readlink(os.path.join(m.driver_root(), "lib/i386-linux-gnu/libcuda.so.1")), f"libcuda.so.{v}")
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            self.assertIn(f"/lib/i386-linux-gnu/libcuda.so.{v}", f.read())

    def test_only_nvidia_current_bound_warns_about_what_egl_and_glx_need(self):
        """Item 5: libGLX_nvidia needs libnvidia-glcore, -tls, -glsi (DT_NEEDED), libEGL_nvidia -glsi and, by
        name at run time, -eglcore; they sit in the lib dir itself, which is not bound."""
        v = self.v535
        m = self.machine(self.bookworm, [f"{LIB}/nvidia/current", "/usr/lib/nvidia/current", "/lib/firmware/nvidia"], v)
        r = self.setup_ready(m, v)
        closure = [w for w in self.warnings(r.result) if " needs " in w]
        wanted = {("libGLX_nvidia", "libnvidia-glcore"), ("libGLX_nvidia", "libnvidia-tls"), ("libGLX_nvidia", "libnvidia-glsi"),
                  ("libEGL_nvidia", "libnvidia-glsi"), ("libEGL_nvidia", "libnvidia-eglcore")}
        found = set()
        for w in closure:
            for lib, need in wanted:
                if f"/{lib}.so.{v} needs {need}.so.{v}" in w:
                    found.add((lib, need))
            self.assertIn("bind the host directory that holds it (on Debian /usr/lib/x86_64-linux-gnu", w)
        self.assertEqual(found, wanted, closure)
        self.assertEqual(len(closure), len(wanted), closure)
        self.assertFalse(any("libc.so" in w or "libX11" in w for w in closure))
        rc, j = self.verify(m)
        self.assertEqual(rc, 0)
        for w in closure:
            self.assertIn(w, j["warnings"])


class TestPlannerSnapshots(RealHostCase):
    def test_the_planner_s_snapshots_are_what_these_hosts_give_today(self):
        """tests/unit/test_plan_real_hosts.cpp plans each host's spec from a snapshot recorded here
        (unbounded_tests/host_snapshots.py): recorded afresh, each must be the checked-in one, byte for
        byte, so the unit test's hosts are these packages as Debian lays them out, not an old copy."""
        trees = {("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware"): self.bookworm,
                 ("bookworm-tesla-535",): self.tesla, ("trixie-550",): self.trixie}
        for name, (sets, _, _) in host_snapshots.HOSTS.items():
            with labelled(name):
                fresh = host_snapshots.record(name, trees[sets], owner=self)
                for file, text in fresh.items():
                    with open(os.path.join(host_snapshots.SNAPSHOTS, name, file)) as f:
                        self.assertEqual(f.read(), text, f"{name}/{file} is stale: re-record it (host_snapshots.py)")


class TestGraphicsConfigs(RealHostCase):
    """Issue 25, item 1: the EGL vendor, Vulkan ICD and layer, and OpenCL ICD files of Debian's
    nvidia-{egl,vulkan,opencl}-common, taken when the host binds their directories, NVIDIA's only."""

    BINDS = [LIB, "/usr/lib/nvidia/current", "/lib/firmware/nvidia", "/usr/share/glvnd/egl_vendor.d", "/usr/share/vulkan",
             "/etc/OpenCL/vendors"]
    FILES = {"usr/share/glvnd/egl_vendor.d/10_nvidia.json": "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
             "usr/share/vulkan/icd.d/nvidia_icd.json": "/usr/share/vulkan/icd.d/nvidia_icd.json",
             "usr/share/vulkan/implicit_layer.d/nvidia_layers.json": "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
             "etc/OpenCL/vendors/nvidia.icd": "/etc/OpenCL/vendors/nvidia.icd"}

    def host_with_mesa(self):
        """The bookworm host, and beside NVIDIA's the files another vendor's packages put in the same
        directories (Mesa's libegl-mesa0 and mesa-vulkan-drivers)."""
        host = dh.HostTree(tempfile.mkdtemp(prefix="graphics-", dir=self.tmp))
        shutil.copytree(self.bookworm.root, host.root, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        self.replace(host, "/usr/share/glvnd/egl_vendor.d/50_mesa.json",
                     '{\n    "file_format_version" : "1.0.0",\n    "ICD" : {\n        "library_path" : "libEGL_mesa.so.0"\n    }\n}\n')
        self.replace(host, "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
                     '{"ICD": {"api_version": "1.3.238", "library_path": "/usr/lib/x86_64-linux-gnu/libvulkan_intel.so"}, '
                     '"file_format_version": "1.0.0"}\n')
        return host

    @staticmethod
    def replace(host, path, text):
        """A file of this host's own: the copy shares the others' inodes (hard links)."""
        if os.path.lexists(host.p(path)):
            os.unlink(host.p(path))
        with open(host.p(path), "w") as f:
            f.write(text)

    def test_nvidia_s_files_are_copied_and_mounted_where_loaders_look(self):
        v = self.v535
        host = self.host_with_mesa()
        m = self.machine(host, self.BINDS, v)
        r = self.setup_ready(m, v)
        self.assertEqual(self.warnings(r.result), [])
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            spec = yaml.safe_load(f)
        mounts = {mt["containerPath"]: mt["hostPath"] for mt in spec["containerEdits"]["mounts"]}
        for rel, container in self.FILES.items():
            copy = os.path.join(m.driver_root(), rel)
            self.assertTrue(os.path.isfile(copy) and not os.path.islink(copy), rel)
            with open(copy, "rb") as a, open(host.p("/" + rel), "rb") as b:
                self.assertEqual(a.read(), b.read(), rel)
            self.assertEqual(mounts.get(container), f"/run/nvidia/driver/{rel}")
        text = json.dumps(spec)
        self.assertNotIn("mesa", text)
        self.assertNotIn("intel_icd", text)
        rc, j = self.verify(m)
        self.assertEqual(rc, 0, j)

    def test_a_file_of_nvidia_s_name_that_is_not_nvidia_s_is_skipped(self):
        v = self.v535
        host = self.host_with_mesa()
        self.replace(host, "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
                     '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_mesa.so.0"}}\n')
        self.replace(host, "/usr/share/vulkan/icd.d/nvidia_icd.json", "[" * 100 + "]" * 100)
        self.replace(host, "/etc/OpenCL/vendors/nvidia.icd", "x" * (1 << 20))
        m = self.machine(host, self.BINDS, v)
        r = self.setup_ready(m, v)
        w = self.warnings(r.result)
        self.assertTrue(any("10_nvidia.json" in x and "libEGL_mesa.so.0, not an NVIDIA library" in x for x in w), w)
        self.assertTrue(any("nvidia_icd.json" in x and "nested deeper than 8 levels" in x for x in w), w)
        self.assertTrue(any("nvidia.icd" in x and "larger than 65536 bytes" in x for x in w), w)
        for rel in ("usr/share/glvnd/egl_vendor.d/10_nvidia.json", "usr/share/vulkan/icd.d/nvidia_icd.json",
                    "etc/OpenCL/vendors/nvidia.icd"):
            self.assertFalse(os.path.exists(os.path.join(m.driver_root(), rel)), rel)
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), "usr/share/vulkan/implicit_layer.d/nvidia_layers.json")))

    def test_without_the_binds_there_are_none(self):
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/usr/lib/nvidia/current"], v)
        self.setup_ready(m, v)
        self.assertFalse(os.path.exists(os.path.join(m.driver_root(), "usr")))


class TestFlavours(RealHostCase):
    def test_tesla_flavour(self):
        """Item 2: <multiarch>/nvidia/tesla-535/ and /usr/lib/nvidia/tesla-535/."""
        v = self.vtesla
        m = self.machine(self.tesla, [LIB, "/usr/lib/nvidia/tesla-535"], v)
        r = self.setup_ready(m, v)
        self.assertRegularCopy(m, f"libcuda.so.{v}", self.tesla.p(f"{LIB}/nvidia/tesla-535/libcuda.so.{v}"))
        self.assertRegularCopy(m, f"libnvidia-nvvm.so.{v}", self.tesla.p(f"{LIB}/nvidia/tesla-535/libnvidia-nvvm.so.{v}"))
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), "bin", "nvidia-smi")))
        self.assertEqual([w for w in self.warnings(r.result) if "nvidia-smi" in w], [])

    def test_the_kernel_module_chooses_between_flavours(self):
        host = dh.HostTree(os.path.join(self.tmp, "two-flavours"))
        dh.install_debian(host, "bookworm-535")
        dh.install_debian(host, "bookworm-tesla-535")
        for v, smi_dir in ((self.vtesla, "/usr/lib/nvidia/tesla-535"), (self.v535, "/usr/lib/nvidia/current")):
            m = self.machine(host, [LIB, smi_dir], v)
            self.setup_ready(m, v)
            flavour = "tesla-535" if v == self.vtesla else "current"
            self.assertRegularCopy(m, f"libcuda.so.{v}", host.p(f"{LIB}/nvidia/{flavour}/libcuda.so.{v}"))
            self.assertFalse(any(n.startswith("libcuda.so.5") and not n.endswith(v) for n in os.listdir(m.libdir())))


class TestFlavourIsolation(RealHostCase):
    """Issue 34, items 1 and 2: Debian with two flavours staged, nvidia/current at 550 and nvidia/tesla-535 at
    535, the 535 module loaded; and flavour directories that sort before current."""

    API = "libnvidia-api.so.1"

    def two_flavours(self):
        """tesla-535 installed first, then trixie's 550: the alternatives select current, as they do until the
        admin switches them, while the loaded module is 535. Each flavour has its own NVAPI (Debian's
        libnvidia-api1 and its tesla sibling: nvidia/<flavour>/libnvidia-api.so.1, with the lib dir's
        alternatives link), distinguishable by a marker after the ELF."""
        host = dh.HostTree(tempfile.mkdtemp(prefix="flavours-", dir=self.tmp))
        dh.install_debian(host, "bookworm-tesla-535")
        dh.install_debian(host, "trixie-550")
        for flavour in ("current", "tesla-535"):
            path = host.p(f"{LIB}/nvidia/{flavour}/{self.API}")
            shutil.copy(fixture(self.API), path)
            with open(path, "ab") as f:
                f.write(f"flavour {flavour}".encode())
        alt = f"/etc/alternatives/nvidia--{self.API}-x86_64-linux-gnu"
        host.symlink(alt, f"{LIB}/{self.API}")
        host.symlink(f"{LIB}/nvidia/current/{self.API}", alt)
        self.assertEqual(os.readlink(host.p("/etc/alternatives/nvidia--nvidia-smi")), "/usr/lib/nvidia/current/nvidia-smi")
        return host

    def assertOnlyTesla(self, m, host, r):
        v = self.vtesla
        self.assertRegularCopy(m, self.API, host.p(f"{LIB}/nvidia/tesla-535/{self.API}"))
        self.assertRegularCopy(m, f"libcuda.so.{v}", host.p(f"{LIB}/nvidia/tesla-535/libcuda.so.{v}"))
        with open(os.path.join(m.driver_root(), "bin", "nvidia-smi"), "rb") as a, \
                open(host.p("/usr/lib/nvidia/tesla-535/nvidia-smi"), "rb") as b:
            self.assertEqual(a.read(), b.read(), "nvidia-smi is not the 535 driver's")
        # Nothing of the 550 driver: no file whose bytes are one of current's, no warning about its copies.
        current = set()
        for d in (f"{LIB}/nvidia/current", "/usr/lib/nvidia/current"):
            for n in os.listdir(host.p(d)):
                path = os.path.join(host.p(d), n)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        current.add(f.read())
        for dirpath, _, names in os.walk(m.driver_root()):
            for n in names:
                path = os.path.join(dirpath, n)
                if os.path.isfile(path) and not os.path.islink(path) and not n.startswith("."):
                    with open(path, "rb") as f:
                        self.assertNotIn(f.read(), current, f"{path} is the 550 driver's")
        self.assertEqual([w for w in self.warnings(r.result) if "Ignoring" in w or "550" in w], [])

    def test_every_file_comes_from_the_chosen_flavour(self):
        """Item 1: the lib dir, current's directory as a tree of its own and tesla's smi directory bound;
        libnvidia-api.so.1 (no version in its name) was taken from current (550) into the 535 root, with a
        warning that the 535 copy was ignored."""
        host = self.two_flavours()
        for label, env in envs():
            with labelled(label):
                m = self.machine(host, [LIB, f"{LIB}/nvidia/current", "/usr/lib/nvidia/tesla-535"], self.vtesla)
                r = m.setup(env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.result["driver_version"], self.vtesla)
                self.assertOnlyTesla(m, host, r)
                self.assertTrue(any("/run/host-nvidia/0/nvidia/current" in n and "550.163.01" in n for n in r.result["notes"]),
                                r.result["notes"])
                rc, j = self.verify(m)
                self.assertEqual(rc, 0, j)

    def test_links_into_the_other_flavour_are_not_followed_there(self):
        """Item 1 through the alternatives: /etc/alternatives and /usr/bin bound, their links selecting current
        (550): the lib dir's libnvidia-api.so.1 and /usr/bin/nvidia-smi lead into the 550 driver's files, which
        are not taken; the 535 driver's own are."""
        host = self.two_flavours()
        for label, env in envs():
            with labelled(label):
                m = self.machine(host, [LIB, "/etc/alternatives", "/usr/bin", "/usr/lib/nvidia/tesla-535"], self.vtesla)
                r = m.setup(env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertOnlyTesla(m, host, r)
                self.assertTrue(any("/run/host-nvidia/0/libnvidia-api.so.1" in n for n in r.result["notes"]), r.result["notes"])

    def test_current_is_looked_at_before_the_cap(self):
        """Item 2: 32 flavour directories that sort before current ("a00".."a31", as a host with old
        flavours might have) dropped current, and setup failed with "No libcuda.so.<version> found". current
        first, always; the cap that bites says so, naming what it ignored."""
        host = dh.HostTree(tempfile.mkdtemp(prefix="many-flavours-", dir=self.tmp))
        shutil.copytree(self.trixie.root, host.root, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        for i in range(32):
            os.makedirs(host.p(f"{LIB}/nvidia/a{i:02d}"))
        v = self.v550
        for label, env in envs():
            with labelled(label):
                m = self.machine(host, [LIB, "/usr/lib/nvidia/current"], v)
                r = m.setup(env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertRegularCopy(m, f"libcuda.so.{v}", host.p(f"{LIB}/nvidia/current/libcuda.so.{v}"))
                self.assertRefreshBuildsTheSame(m, r, env=env)  # the walk's flavours, capped alike
                cap = [w for w in self.warnings(r.result) if "flavour directories" in w]
                self.assertEqual(len(cap), 1, r.result["warnings"])
                self.assertIn("/run/host-nvidia/0/nvidia", cap[0])
                self.assertIn("33", cap[0])
                self.assertIn("32", cap[0])
                self.assertIn("a31", cap[0])
                self.assertNotIn("a30", cap[0])

    def test_a_cap_that_drops_the_driver_says_so_in_the_failure(self):
        """Item 2: the driver's flavour beyond the cap (tesla-535 after current and 31 others): the failure
        names the cap and what it ignored, not only "No libcuda.so.<version> found"."""
        host = dh.HostTree(tempfile.mkdtemp(prefix="many-flavours-", dir=self.tmp))
        shutil.copytree(self.tesla.root, host.root, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        for i in range(31):
            os.makedirs(host.p(f"{LIB}/nvidia/b{i:02d}"))
        os.makedirs(host.p(f"{LIB}/nvidia/current"))
        for label, env in envs():
            with labelled(label):
                m = self.machine(host, [LIB, "/usr/lib/nvidia/tesla-535"], self.vtesla)
                r = m.setup(env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertIn("No libcuda.so.<version> found", r.stderr)
                self.assertIn("tesla-535", r.stderr)
                self.assertIn("32 flavour directories", r.stderr)


class TestOtherFamilies(RealHostCase):
    """The same real files laid out as Ubuntu (lib dir) and Red Hat / Azure Linux (/usr/lib64) install them:
    what worked before keeps working, and takes only driver files from a lib dir full of others."""

    def flat_host(self, name, libdir):
        host = dh.HostTree(os.path.join(self.tmp, name))
        dh.install_flat(host, self.bookworm, "x86_64-linux-gnu", libdir)
        for lib in ("libz.so.1", "libstdc++.so.6", "libmount.so.1"):  # the host's other libraries
            real = os.path.realpath(os.path.join(LIB, lib))
            shutil.copy(real, host.p(os.path.join(libdir, os.path.basename(real))))
        return host

    def check_flat(self, host, libdir):
        v = self.v535
        m = self.machine(host, [libdir, "/usr/bin"], v)
        r = self.setup_ready(m, v)
        self.assertEqual([w for w in self.warnings(r.result) if "GSP firmware" not in w], [])
        names = os.listdir(m.libdir())
        self.assertFalse(any(n.startswith(("libz", "libstdc++", "libmount")) for n in names), names)
        self.assertIn(f"libnvidia-nvvm.so.{v}", names)
        self.assertEqual(os.readlink(os.path.join(m.libdir(), "libcuda.so.1")), f"libcuda.so.{v}")
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), "bin", "nvidia-smi")))

    def test_ubuntu_layout(self):
        self.check_flat(self.flat_host("ubuntu", LIB), LIB)

    def test_red_hat_layout(self):
        self.check_flat(self.flat_host("redhat", "/usr/lib64"), "/usr/lib64")


    def test_run_installer_layout(self):
        v = self.v535
        host = dh.HostTree(os.path.join(self.tmp, "run-installer"))
        dh.install_run(host, self.bookworm)
        self.assertEqual(os.readlink(host.p(f"{LIB}/libcuda.so")), "libcuda.so.1")
        m = self.machine(host, [LIB, "/usr/lib32", "/usr/bin", "/lib/firmware/nvidia"], v)
        r = self.setup_ready(m, v)
        self.assertEqual(self.warnings(r.result), [])
        self.assertRegularCopy(m, f"libcuda.so.{v}", host.p(f"/usr/lib32/libcuda.so.{v}"), arch="i386-linux-gnu")
        self.assertRegularCopy(m, f"libnvidia-ml.so.{v}", host.p(f"{LIB}/libnvidia-ml.so.{v}"))
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), f"lib/firmware/nvidia/{v}/gsp_ga10x.bin")))

class TestGpuSubset(RealHostCase):
    def test_a_machine_given_gpus_2_and_3_of_8(self):
        """Item 3 on the real files: the spec offers the two bound GPUs as 0 and 1, by UUID and in all."""
        v = self.v535
        m = self.machine(self.bookworm, [LIB, "/usr/lib/nvidia/current", "/lib/firmware/nvidia"], v, gpus=8)
        for minor in (0, 1, 4, 5, 6, 7):
            os.unlink(m.p(f"/dev/nvidia{minor}"))
        m.config("expected_gpus: 2\n")
        r = self.setup_ready(m, v)
        self.assertEqual(r.result["gpus"], 2)
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            spec = f.read()
        doc = yaml.safe_load(spec)
        devices = {d["name"]: [n["path"] for n in d["containerEdits"].get("deviceNodes", [])] for d in doc["devices"]}
        self.assertEqual(devices["0"], ["/dev/nvidia2"])
        self.assertEqual(devices["1"], ["/dev/nvidia3"])
        self.assertEqual(devices[UUIDS[2]], ["/dev/nvidia2"])
        self.assertEqual(sorted(devices["all"]), ["/dev/nvidia2", "/dev/nvidia3"])
        self.assertEqual(set(devices), {"0", "1", UUIDS[2], UUIDS[3], "all"})
        for u in UUIDS[:2] + UUIDS[4:]:
            self.assertNotIn(u, spec)
        listed = [w for w in r.result["warnings"] if "have no /dev/nvidia<minor>" in w]
        self.assertEqual(len(listed), 1, r.result["warnings"])
        for bus in ("0000:18:00.0", "0000:19:00.0", "0000:1c:00.0", "0000:1f:00.0"):
            self.assertIn(bus, listed[0])
        rc, j = self.verify(m)
        self.assertEqual(rc, 0, j)


if __name__ == "__main__":
    main()
