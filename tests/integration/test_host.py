#!/usr/bin/env python3
"""Issue 45: the host's half. `unbounded-nvidia-host binds` on every host layout of the real-host tier
(Debian's real NVIDIA packages laid out as each family installs them, debian_hosts.py), applied as a
machine's staging and devices, makes setup ready with no warning asking for a bind and the same root
and spec as the README's hand-written recipe (or a better one, said at each case); a bind left out of
its output is missed. Then its .nspawn editing and --check, and `check`, the host's preflight, on
fake /sys and /proc trees."""

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import unittest

from unbounded_tests import debian_hosts as dh
from unbounded_tests import host_snapshots
from unbounded_tests.harness import ARCH, MachineRoot, main, make_chardev, write

HOST_BIN = os.environ["HOST_BIN"]
LIB = "/usr/lib/x86_64-linux-gnu"
UUIDS = host_snapshots.UUIDS
GRAPHICS = ["/usr/share/glvnd/egl_vendor.d", "/usr/share/vulkan", "/etc/OpenCL/vendors"]


def host_state(host, version, gpus=1, open_module=False):
    """What a running host has beside its files: the module's /proc and /sys entries and its nodes."""
    h = MachineRoot(tmp=host.root)
    h.set_proc_version(version, open_module)
    h.add_control_nodes()
    h.write_proc_devices()
    for i in range(gpus):
        bus = f"0000:{0x18 + i:02x}:00.0"
        h.add_gpu(i, bus, UUIDS[i])
        pci = host.p(f"/sys/devices/pci0000:00/{bus}")
        write(os.path.join(pci, "vendor"), "0x10de\n")
        write(os.path.join(pci, "class"), "0x030200\n")
        os.makedirs(host.p("/sys/bus/pci/drivers/nvidia"), exist_ok=True)
        if not os.path.lexists(os.path.join(pci, "driver")):
            os.symlink("../../../bus/pci/drivers/nvidia", os.path.join(pci, "driver"))
        os.makedirs(host.p("/sys/bus/pci/devices"), exist_ok=True)
        link = host.p(f"/sys/bus/pci/devices/{bus}")
        if not os.path.lexists(link):
            os.symlink(f"../../../devices/pci0000:00/{bus}", link)
    for m in ("nvidia", "nvidia_uvm", "nvidia_modeset"):
        os.makedirs(host.p(f"/sys/module/{m}"), exist_ok=True)
    return h


def copy_node(src, dst):
    st = os.lstat(src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    make_chardev(dst, os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode))


class HostCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if ARCH != "x86_64-linux-gnu":
            raise RuntimeError(f"these hosts are amd64 ones; this build is for {ARCH}")
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-host-")
        cls.bookworm = dh.HostTree(os.path.join(cls.tmp, "bookworm"))
        for s in ("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware"):
            dh.install_debian(cls.bookworm, s)
        cls.v535 = host_snapshots.version_in(cls.bookworm)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy_host(self, host, name):
        """A host of this test's own, sharing the installed files' inodes."""
        copy = dh.HostTree(os.path.join(self.tmp, name))
        shutil.copytree(host.root, copy.root, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        self.addCleanup(shutil.rmtree, copy.root, True)
        return copy

    def host(self, *args, root):
        return subprocess.run([HOST_BIN, "--root", root, *args], capture_output=True, text=True, timeout=120)

    def binds(self, host, *args, machine="gpu1"):
        r = self.host("--json", "binds", machine, "--print", *args, root=host.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def apply(self, host, lines, config=None):
        """A machine given what `lines` bind (the .nspawn lines of binds --json), as nspawn would give
        them: the staging directories (hard-linked copies), the nodes, the caps directories; and the
        host's /proc and /sys, which a machine shares."""
        m = MachineRoot(self)
        for line in lines:
            section, setting = line.split(" ", 1)
            key, value = setting.split("=", 1)
            if section != "[Files]":
                continue
            src, _, dest = value.partition(":")
            dest = dest or src
            if dest.startswith("/run/host-nvidia/"):
                dh.bind(m, host, src, int(dest.rsplit("/", 1)[1]))
            elif dest.startswith("/dev/") and os.path.isdir(host.p(src)):
                for name in os.listdir(host.p(src)):
                    copy_node(os.path.join(host.p(src), name), m.p(f"{dest}/{name}"))
            elif dest.startswith("/dev/"):
                copy_node(host.p(src), m.p(dest))
        for shared in ("/proc", "/sys"):
            shutil.copytree(host.p(shared), m.p(shared), symlinks=True, dirs_exist_ok=True)
        if config:
            m.config(config)
        return m

    def manifest(self, m):
        with open(os.path.join(m.driver_root(), ".unbounded-manifest.json")) as f:
            entries = json.load(f)["entries"]
        return [{k: v for k, v in e.items() if k not in ("source", "mtime_ns", "source_id")} for e in entries]

    def spec(self, m):
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            return host_snapshots.without_version(f.read())

    def assertReadyWithoutBindWarnings(self, m, version, host_lacks=()):
        """`host_lacks`: what the host itself does not have (a warning binds gave too)."""
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["driver_version"], version)
        asking = [w for w in r.result["warnings"] if "bind" in w and not any(h in w for h in host_lacks)]
        self.assertEqual(asking, [], r.result["warnings"])
        return r

    def assertEachStagingContributes(self, m, out):
        """No bound directory gives nothing: each staging mount is the source of a file of the root
        (the manifest says where each came from) or a file of the spec (a graphics configuration)."""
        with open(os.path.join(m.driver_root(), ".unbounded-manifest.json")) as f:
            sources = [e.get("source", "") for e in json.load(f)["entries"]]
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            spec = f.read()
        for n, host_dir in enumerate(out["staging"]):
            mount = f"/run/host-nvidia/{n}/"
            self.assertTrue(any(s.startswith(mount) for s in sources) or mount in spec,
                            f"{host_dir} (bound at {mount}) gives the machine nothing: {out['staging']}")

    def assertSameAsRecipe(self, host, out, recipe, version, config=None, host_lacks=()):
        """binds' output applied, and the hand-written recipe (`recipe`: host paths at /run/host-nvidia/N
        with the same nodes), give the same root and spec."""
        ours = self.apply(host, out["nspawn"], config)
        self.assertReadyWithoutBindWarnings(ours, version, host_lacks)
        self.assertEachStagingContributes(ours, out)
        theirs = host_snapshots.machine(self, host, recipe, version, gpus=1)
        shutil.copytree(host.p("/sys"), theirs.p("/sys"), symlinks=True, dirs_exist_ok=True)
        if config:
            theirs.config(config)
        r = theirs.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.manifest(ours), self.manifest(theirs))
        self.assertEqual(self.spec(ours), self.spec(theirs))
        return ours

    def staging_lines(self, out):
        return [l for l in out["nspawn"] if ":/run/host-nvidia/" in l]


class TestBindsOnRealHosts(HostCase):
    def test_debian_bookworm_binds_its_lib_dirs_the_flavour_firmware_and_graphics_configs(self):
        """Better than the README's Debian row: its i386 lib dir and the graphics configs' directories
        (EGL, Vulkan, OpenCL pods), which that row leaves to other rows, are bound too."""
        host = self.copy_host(self.bookworm, "debian")
        host_state(host, self.v535)
        out = self.binds(host)
        self.assertEqual(out["driver_version"], self.v535)
        self.assertEqual(out["staging"], [LIB, "/usr/lib/i386-linux-gnu", "/usr/lib/nvidia/current", "/lib/firmware/nvidia"] + GRAPHICS)
        recipe = [LIB, "/usr/lib/i386-linux-gnu", "/usr/lib/nvidia/current", "/lib/firmware/nvidia"] + GRAPHICS
        self.assertSameAsRecipe(host, out, recipe, self.v535)
        # The recipe with the alternatives directory bound too gives the same root: binds leaves it out.
        self.assertSameAsRecipe(host, out, recipe + ["/etc/alternatives"], self.v535)
        for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia0"):
            self.assertIn(f"[Files] Bind={node}", out["nspawn"])
            self.assertIn(f"{node} rwm", out["device_allow"])

    def test_a_host_without_gsp_firmware_binds_nothing_that_gives_nothing(self):
        """The firmware warning lists the bound directories: each trial without one looked like a new
        warning, so nothing was ever left out (/etc/alternatives, /usr/share/nvidia bound for nothing)."""
        host = dh.HostTree(os.path.join(self.tmp, "no-firmware"))
        self.addCleanup(shutil.rmtree, host.root, True)
        for s in ("bookworm-535", "bookworm-535-i386"):
            dh.install_debian(host, s)
        host_state(host, self.v535)
        out = self.binds(host)
        self.assertEqual(out["staging"], [LIB, "/usr/lib/i386-linux-gnu", "/usr/lib/nvidia/current"] + GRAPHICS)
        self.assertEqual(len(out["warnings"]), 1, out["warnings"])
        self.assertIn("No GSP firmware", out["warnings"][0])
        self.assertIn("/usr/lib/nvidia/current", out["warnings"][0])  # said with the directories bound

    def test_each_bind_left_out_is_missed(self):
        host = self.copy_host(self.bookworm, "debian-less")
        host_state(host, self.v535)
        out = self.binds(host)
        full = self.apply(host, out["nspawn"])
        self.assertReadyWithoutBindWarnings(full, self.v535)
        whole = self.manifest(full)
        for line in self.staging_lines(out):
            kept = [l for l in out["nspawn"] if l != line]
            # The numbers of the others stay: a machine's staging may have gaps.
            m = self.apply(host, kept)
            r = m.setup()
            missed = r.returncode != 0 or any("bind" in w for w in r.result["warnings"]) or self.manifest(m) != whole
            self.assertTrue(missed, f"leaving out {line} changed nothing")

    def test_debian_flavour_and_the_module_choosing_it(self):
        host = dh.HostTree(os.path.join(self.tmp, "tesla"))
        self.addCleanup(shutil.rmtree, host.root, True)
        dh.install_debian(host, "bookworm-tesla-535")
        v = host_snapshots.version_in(host, "tesla-535")
        host_state(host, v)
        out = self.binds(host)
        self.assertIn("/usr/lib/nvidia/tesla-535", out["staging"])
        # This host has no firmware package installed: binds says so, and so does setup.
        self.assertTrue(any("No GSP firmware" in w for w in out["warnings"]), out["warnings"])
        self.assertSameAsRecipe(host, out, [LIB, "/usr/lib/nvidia/tesla-535"] + [g for g in GRAPHICS if g in out["staging"]], v,
                                host_lacks=("No GSP firmware",))

    def test_trixie_550(self):
        host = dh.HostTree(os.path.join(self.tmp, "trixie"))
        self.addCleanup(shutil.rmtree, host.root, True)
        dh.install_debian(host, "trixie-550")
        v = host_snapshots.version_in(host)
        host_state(host, v)
        out = self.binds(host)
        self.assertIn(LIB, out["staging"])
        self.assertSameAsRecipe(host, out, [LIB, "/usr/lib/nvidia/current"] + [g for g in GRAPHICS if g in out["staging"]], v,
                                host_lacks=("No GSP firmware",))

    def flat(self, name, libdir):
        host = dh.HostTree(os.path.join(self.tmp, name))
        self.addCleanup(shutil.rmtree, host.root, True)
        dh.install_flat(host, self.bookworm, "x86_64-linux-gnu", libdir)
        shutil.copytree(self.bookworm.p("/lib/firmware/nvidia"), host.p("/lib/firmware/nvidia"), dirs_exist_ok=True)
        host_state(host, self.v535)
        return host

    def test_ubuntu_layout(self):
        host = self.flat("ubuntu", LIB)
        out = self.binds(host)
        self.assertEqual(out["staging"][:1] + [p for p in out["staging"] if p in ("/usr/bin", "/lib/firmware/nvidia")],
                         [LIB, "/usr/bin", "/lib/firmware/nvidia"])
        self.assertSameAsRecipe(host, out, [LIB, "/usr/bin", "/lib/firmware/nvidia"] + [g for g in GRAPHICS if g in out["staging"]],
                                self.v535)

    def test_red_hat_layout(self):
        """Its 32-bit libraries live in /usr/lib (i686 packages), which binds once never considered: the
        recipe's 32-bit files were missing with no warning."""
        host = self.flat("redhat", "/usr/lib64")
        dh.install_flat(host, self.bookworm, "i386-linux-gnu", "/usr/lib", bindir=None)
        out = self.binds(host)
        self.assertEqual(out["staging"][:2], ["/usr/lib64", "/usr/lib"])
        m = self.assertSameAsRecipe(host, out, ["/usr/lib64", "/usr/lib", "/usr/bin", "/lib/firmware/nvidia"] +
                                    [g for g in GRAPHICS if g in out["staging"]], self.v535)
        self.assertTrue(os.path.exists(os.path.join(m.driver_root(), f"lib/i386-linux-gnu/libcuda.so.{self.v535}")))

    def test_run_installer_on_a_lib64_host(self):
        host = dh.HostTree(os.path.join(self.tmp, "run-lib64"))
        self.addCleanup(shutil.rmtree, host.root, True)
        dh.install_flat(host, self.bookworm, "x86_64-linux-gnu", "/usr/lib64", dev_links=True)
        dh.install_flat(host, self.bookworm, "i386-linux-gnu", "/usr/lib", bindir=None, dev_links=True)
        shutil.copytree(self.bookworm.p("/lib/firmware/nvidia"), host.p("/lib/firmware/nvidia"), dirs_exist_ok=True)
        host_state(host, self.v535)
        out = self.binds(host)
        self.assertEqual(out["staging"][:2], ["/usr/lib64", "/usr/lib"])
        self.assertSameAsRecipe(host, out, ["/usr/lib64", "/usr/lib", "/usr/bin", "/lib/firmware/nvidia"] +
                                [g for g in GRAPHICS if g in out["staging"]], self.v535)

    def test_run_installer_layout(self):
        host = dh.HostTree(os.path.join(self.tmp, "run-installer"))
        self.addCleanup(shutil.rmtree, host.root, True)
        dh.install_run(host, self.bookworm)
        host_state(host, self.v535)
        out = self.binds(host)
        self.assertEqual(out["staging"][:2], [LIB, "/usr/lib32"])
        self.assertSameAsRecipe(host, out, [LIB, "/usr/lib32", "/usr/bin", "/lib/firmware/nvidia"] +
                                [g for g in GRAPHICS if g in out["staging"]], self.v535)

    def test_without_optix_the_data_file_is_not_what_binds_are_chosen_by(self):
        host = self.copy_host(self.bookworm, "no-optix")
        host_state(host, self.v535)
        out = self.binds(host, "--no-optix")
        self.assertSameAsRecipe(host, out, out["staging"], self.v535, config="nvoptix: false\n")


class TestBindsDevices(HostCase):
    def test_a_subset_of_gpus_by_index_uuid_and_pci_address(self):
        host = self.copy_host(self.bookworm, "subset")
        host_state(host, self.v535, gpus=8)
        out = self.binds(host, "--gpus", f"2,{UUIDS[3]},1d:00.0", "--credentials")
        gpu_nodes = sorted(l for l in out["nspawn"] if l.startswith("[Files] Bind=/dev/nvidia") and l[-1].isdigit())
        self.assertEqual(gpu_nodes, ["[Files] Bind=/dev/nvidia2", "[Files] Bind=/dev/nvidia3", "[Files] Bind=/dev/nvidia5"])
        self.assertNotIn("/dev/nvidia0 rwm", out["device_allow"])
        self.assertIn("[Files] BindReadOnly=/etc/unbounded-nvidia-host/machines/gpu1:/run/host-nvidia-settings", out["nspawn"])
        self.assertEqual(out["settings"], {"unbounded-nvidia.expected_gpus": "3",
                                           "unbounded-nvidia.gpus": f"{UUIDS[2]},{UUIDS[3]},{UUIDS[5]}"})
        self.assertFalse([l for l in out["nspawn"] if "Credential" in l], out["nspawn"])
        m = self.apply(host, out["nspawn"], config="expected_gpus: 3\n")
        r = self.assertReadyWithoutBindWarnings(m, self.v535, host_lacks=("5 of the 8 GPU(s)",))
        self.assertEqual(r.result["gpus"], 3)
        bad = self.host("binds", "gpu1", "--print", "--gpus", "9", root=host.root)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("No GPU of this host is '9'", bad.stderr)

    def test_mig_imex_caps_ipc_and_licensing_directories(self):
        host = self.copy_host(self.bookworm, "caps")
        h = host_state(host, self.v535)
        h.add_mig(0, {7: [0]})
        h.add_imex_channels(range(2))
        socks = h.add_ipc()
        self.addCleanup(lambda: [s.close() for s in socks])
        os.makedirs(host.p("/srv/licensing"))
        out = self.binds(host, "--licensing", "/srv/licensing")
        for line in ("[Files] Bind=/dev/nvidia-caps", "[Files] Bind=/dev/nvidia-caps-imex-channels",
                     "[Files] Bind=/run/nvidia-persistenced", "[Files] Bind=/run/nvidia-fabricmanager", "[Files] Bind=/tmp/nvidia-mps",
                     "[Files] BindReadOnly=/srv/licensing:/run/host-nvidia-licensing"):
            self.assertIn(line, out["nspawn"])
        self.assertIn("char-nvidia-caps rw", out["device_allow"])
        self.assertIn("char-nvidia-caps-imex-channels rw", out["device_allow"])
        # Written normalized: systemd-machined (binds --apply) refuses a source with // or /./ in it.
        spelled = self.binds(host, "--licensing", "/srv//./licensing/")
        self.assertIn("[Files] BindReadOnly=/srv/licensing:/run/host-nvidia-licensing", spelled["nspawn"])
        m = self.apply(host, out["nspawn"])
        self.assertReadyWithoutBindWarnings(m, self.v535)
        self.assertTrue(os.path.exists(m.p("/etc/cdi/nvidia-imex-channel.yaml")))
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            self.assertIn("nvidia-cap", f.read())

    def test_values_that_a_unit_file_would_read_otherwise_are_refused(self):
        host = self.copy_host(self.bookworm, "refused")
        host_state(host, self.v535)
        for args, text in ((["binds", "../evil", "--print"], "machine name"),
                           (["binds", "gpu1", "--print", "--licensing", "/srv/a:b"], "--licensing"),
                           (["binds", "gpu1", "--print", "--licensing", "/srv/%n"], "--licensing"),
                           (["binds", "gpu1", "--enabled=maybe"], "--enabled"),
                           (["binds", "gpu1", "--print", "--gpus", ","], "--gpus names no GPU"),
                           (["binds", "gpu_1", "--print"], "machine name"),
                           (["binds", "gpu1", "--print", "--licensing", "/srv/none"], "is not a directory"),
                           (["check", "--gpus", "1"], "only binds"),
                           (["check", "--apply"], "only binds"),
                           (["binds", "gpu1", "--apply", "--check"], "exclude each other"),
                           # --apply changes this host's running machine: a tree is no host that runs one
                           (["binds", "gpu1", "--apply"], "not with --root")):
            r = self.host(*args, root=host.root)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(text, r.stderr)


class TestNspawnFiles(HostCase):
    def setUp(self):
        self.h = self.copy_host(self.bookworm, f"files-{self._testMethodName}")
        host_state(self.h, self.v535)
        self.nspawn = self.h.p("/etc/systemd/nspawn/gpu1.nspawn")
        self.dropin = self.h.p("/etc/systemd/system/systemd-nspawn@gpu1.service.d/50-unbounded-nvidia.conf")

    def test_write_keeps_the_operator_s_lines_and_check_names_each_difference(self):
        write(self.nspawn, "[Exec]\nBoot=yes\n# the operator's\n\n[Files]\nBind=/srv/data\nBindReadOnly=/usr/lib/x86_64-linux-gnu:/run/host-nvidia/15\n"
                           "\n[Network]\nVirtualEthernet=no\n")
        r = self.host("binds", "gpu1", root=self.h.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.nspawn) as f:
            text = f.read()
        for kept in ("Boot=yes", "# the operator's", "Bind=/srv/data", "[Network]\nVirtualEthernet=no"):
            self.assertIn(kept, text)
        self.assertNotIn("/run/host-nvidia/15", text)
        self.assertIn(f"BindReadOnly={LIB}:/run/host-nvidia/0\n", text)
        with open(self.dropin) as f:
            self.assertIn("DeviceAllow=/dev/nvidiactl rwm\n", f.read())
        self.assertEqual(self.host("binds", "gpu1", "--check", root=self.h.root).returncode, 0)
        again = self.host("binds", "gpu1", root=self.h.root)
        self.assertIn("up to date", again.stdout)
        with open(self.nspawn) as f:
            self.assertEqual(f.read(), text)

        write(self.nspawn, text.replace("Bind=/dev/nvidia0\n", "") + "[Files]\nBind=/dev/nvidia7\n")
        c = self.host("binds", "gpu1", "--check", root=self.h.root)
        self.assertEqual(c.returncode, 1)
        self.assertIn("missing in /etc/systemd/nspawn/gpu1.nspawn: [Files] Bind=/dev/nvidia0", c.stdout)
        self.assertIn("superfluous in /etc/systemd/nspawn/gpu1.nspawn: [Files] Bind=/dev/nvidia7", c.stdout)
        os.unlink(self.dropin)
        c = self.host("binds", "gpu1", "--check", root=self.h.root)
        self.assertIn("/etc/systemd/system/systemd-nspawn@gpu1.service.d/50-unbounded-nvidia.conf is missing", c.stdout)

    def test_a_second_run_changes_nothing(self):
        for run in range(3):
            r = self.host("binds", "gpu1", root=self.h.root)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(self.nspawn) as f:
                text = f.read()
            if run:
                self.assertIn("up to date", r.stdout)
                self.assertEqual(text, first)
            first = text
        self.assertEqual(text.count("[Files]"), 1, text)

    def test_a_superfluous_device_allow_is_named(self):
        self.assertEqual(self.host("binds", "gpu1", root=self.h.root).returncode, 0)
        with open(self.dropin, "a") as f:
            f.write("DeviceAllow=/dev/nvidia7 rwm\n")
        c = self.host("binds", "gpu1", "--check", root=self.h.root)
        self.assertEqual(c.returncode, 1)
        self.assertIn("superfluous in /etc/systemd/system/systemd-nspawn@gpu1.service.d/50-unbounded-nvidia.conf: "
                      "DeviceAllow=/dev/nvidia7 rwm", c.stdout)

    def test_a_symlinked_nspawn_file_is_refused_and_left_alone(self):
        os.makedirs(os.path.dirname(self.nspawn))
        os.symlink("/etc/shadow", self.nspawn)
        r = self.host("binds", "gpu1", root=self.h.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("gpu1.nspawn", r.stderr)
        self.assertTrue(os.path.islink(self.nspawn))


    def read(self, path):
        with open(self.h.p(path)) as f:
            return f.read()

    def binds(self, *args):
        return self.host("binds", "gpu1", *args, root=self.h.root)

    def test_names_systemd_refuses_are_usage_errors_and_write_nothing(self):
        for name in ("gpu-", "gpu..1", "gpu.-1", "gpu-.1", ".host", ".gpu", "gpu.", "a" * 65, "gpu_1"):
            with self.subTest(name=name):
                r = self.host("binds", name, root=self.h.root)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("machine name", r.stderr)
        self.assertFalse(os.path.exists(self.h.p("/etc/systemd/nspawn")))
        self.assertEqual(self.host("binds", "gpu-1.rack-2", "--print", root=self.h.root).returncode, 0)

    def test_an_agent_s_runtime_file_is_refused_naming_it(self):
        """nspawn reads /etc's file first: writing one would hide the agent's /run/systemd/nspawn file."""
        write(self.h.p("/run/systemd/nspawn/gpu1.nspawn"), "[Exec]\nPrivateUsers=pick\n")
        r = self.binds()
        self.assertEqual(r.returncode, 1)
        self.assertIn("/run/systemd/nspawn/gpu1.nspawn is the settings file systemd-nspawn uses for gpu1", r.stderr)
        self.assertFalse(os.path.exists(self.nspawn))
        self.assertFalse(os.path.exists(self.dropin))
        # What it says to do can be done: --print gives the lines, --check judges the agent's file.
        p = self.binds("--print")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Bind=/dev/nvidia0", p.stdout)
        c = self.binds("--check")
        self.assertIn("missing in /run/systemd/nspawn/gpu1.nspawn: [Files] Bind=/dev/nvidia0", c.stdout)

    def test_the_untrusted_file_beside_the_image_is_refused_naming_it(self):
        """nspawn reads /var/lib/machines/gpu1.nspawn only while /etc has none, and untrusted (its Bind=,
        Capability= and network lines ignored): binds' file in /etc would hide it, and copying it there
        would make an image's own privileged lines take effect. Refused; --print and --check still work."""
        beside = "[Exec]\nPrivateUsers=pick\nCapability=all\n\n[Files]\nBind=/:/host\n"
        write(self.h.p("/var/lib/machines/gpu1.nspawn"), beside)
        r = self.binds()
        self.assertEqual(r.returncode, 1)
        self.assertIn("/var/lib/machines/gpu1.nspawn is the settings file systemd-nspawn uses for gpu1, untrusted", r.stderr)
        self.assertFalse(os.path.exists(self.nspawn))
        self.assertFalse(os.path.exists(self.dropin))
        self.assertEqual(self.binds("--print").returncode, 0)
        c = self.binds("--check")
        self.assertEqual(c.returncode, 1)
        self.assertIn("/etc/systemd/nspawn/gpu1.nspawn is missing (nspawn reads /var/lib/machines/gpu1.nspawn)", c.stdout)
        self.assertEqual(self.read("/var/lib/machines/gpu1.nspawn"), beside)

    def test_both_files_or_neither(self):
        write(self.nspawn, "[Exec]\nBoot=yes\n")
        os.makedirs(os.path.join(self.dropin))  # a directory where the drop-in goes
        r = self.binds()
        self.assertEqual(r.returncode, 1)
        self.assertIn("50-unbounded-nvidia.conf: it is a directory", r.stderr)
        self.assertEqual(self.read("/etc/systemd/nspawn/gpu1.nspawn"), "[Exec]\nBoot=yes\n")

    def test_the_operator_s_mode_and_owner_are_kept(self):
        write(self.nspawn, "[Exec]\nEnvironment=TOKEN=secret\n")
        os.chmod(self.nspawn, 0o600)
        os.chown(self.nspawn, 1234, 1235)
        self.assertEqual(self.binds().returncode, 0)
        st = os.stat(self.nspawn)
        self.assertEqual((st.st_mode & 0o7777, st.st_uid, st.st_gid), (0o600, 1234, 1235))
        self.assertIn("Bind=/dev/nvidia0", self.read("/etc/systemd/nspawn/gpu1.nspawn"))

    def test_the_file_is_read_as_systemd_reads_it(self):
        """A byte order mark, CRLF endings and a line continued with a backslash: the operator's own
        Bind=/dev/nvidia0 is still theirs to give up, and binds' first line is never glued to theirs."""
        write(self.nspawn, "\ufeff[Files]\r\nBind=/dev/nvidia0\r\nBind=/srv/a \\\n   /srv/b\nBind=/srv/c\\\n")
        r = self.binds()
        self.assertEqual(r.returncode, 0, r.stderr)
        text = self.read("/etc/systemd/nspawn/gpu1.nspawn")
        self.assertEqual(text.count("Bind=/dev/nvidia0"), 1, text)
        self.assertIn("Bind=/srv/a \\\n   /srv/b\n", text)
        self.assertIn("Bind=/srv/c\\\n\n", text)  # ended before ours
        self.assertEqual(self.binds("--check").returncode, 0)
        j = json.loads(self.host("--json", "binds", "gpu1", "--check", root=self.h.root).stdout)
        lines = {(l["key"], l["value"]): l["ours"] for l in j["nspawn_lines"]}
        self.assertFalse(lines[("Bind", "/srv/a  /srv/b")])  # the backslash read as a blank, as systemd does
        self.assertTrue(lines[("Bind", "/dev/nvidia0")])

    def test_unit_names_the_service_that_runs_the_machine(self):
        r = self.binds("--unit", "gpu-machine@1.service")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("DeviceAllow=/dev/nvidiactl rwm", self.read("/etc/systemd/system/gpu-machine@1.service.d/50-unbounded-nvidia.conf"))
        self.assertFalse(os.path.exists(self.dropin))
        self.assertEqual(self.binds("--unit", "evil/../x.service").returncode, 2)

    def test_a_plain_re_run_keeps_the_host_s_kill_switch(self):
        """Automation re-running binds after a driver upgrade must not switch a machine back on."""
        self.assertEqual(self.binds("--enabled=no").returncode, 0)
        r = self.binds()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Keeping gpu1's enabled=no", r.stderr)
        self.assertEqual(self.read("/etc/unbounded-nvidia-host/machines/gpu1/unbounded-nvidia.enabled"), "no\n")
        self.assertEqual(self.binds("--enabled=auto").returncode, 0)
        self.assertEqual(self.read("/etc/unbounded-nvidia-host/machines/gpu1/unbounded-nvidia.enabled"), "auto\n")

    def test_the_host_tool_refuses_to_run_in_a_container(self):
        r = subprocess.run([HOST_BIN, "check"], capture_output=True, text=True,
                           env={**os.environ, "SYSTEMD_VIRTUALIZATION": "container:systemd-nspawn", "UNBOUNDED_NVIDIA_ROOT": ""})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("this is a container (systemd-nspawn), not a host", r.stderr)

    def test_a_backslash_before_a_blank_does_not_continue_the_line(self):
        """systemd reads `X=a\\ ` (a backslash, then a blank) as a whole line: the next is not swallowed."""
        write(self.nspawn, "[Files]\nBind=/srv/a\\ \nBind=/dev/nvidia0\n")
        self.assertEqual(self.binds().returncode, 0)
        text = self.read("/etc/systemd/nspawn/gpu1.nspawn")
        self.assertEqual(text.count("Bind=/dev/nvidia0\n"), 1, text)
        self.assertEqual(self.binds("--check").returncode, 0)

    def test_settings_are_files_of_a_bound_directory(self):
        settings = "/etc/unbounded-nvidia-host/machines/gpu1"
        self.assertEqual(self.binds("--credentials", "--enabled=no").returncode, 0)
        self.assertIn(f"BindReadOnly={settings}:/run/host-nvidia-settings\n", self.read("/etc/systemd/nspawn/gpu1.nspawn"))
        self.assertEqual(self.read(f"{settings}/unbounded-nvidia.enabled"), "no\n")
        self.assertEqual(self.read(f"{settings}/unbounded-nvidia.expected_gpus"), "1\n")
        self.assertEqual(self.binds("--credentials", "--enabled=no", "--check").returncode, 0)
        write(self.h.p(f"{settings}/unbounded-nvidia.enabled"), "yes\n")
        c = self.binds("--credentials", "--enabled=no", "--check")
        self.assertEqual(c.returncode, 1)
        self.assertIn(f"{settings}/unbounded-nvidia.enabled says 'yes', binds gives 'no'", c.stdout)
        # Not given any more: removed (the machine would still read them), the bind dropped.
        self.assertEqual(self.binds("--credentials", "--enabled=no").returncode, 0)
        r = self.binds("--enabled=auto")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"Removed {settings}/unbounded-nvidia.expected_gpus", r.stdout)
        r = self.binds()
        self.assertEqual(r.returncode, 0, r.stderr)
        # enabled=auto is kept by a plain run, as every value of the kill switch is.
        self.assertEqual(os.listdir(self.h.p(settings)), ["unbounded-nvidia.enabled"])


class TestPreflight(HostCase):
    """`check` on fake /sys, /proc and /dev trees beside the real userspace: each finding, and what a
    hostile tree does to it."""

    def setUp(self):
        self.h = self.copy_host(self.bookworm, f"c{len(self._testMethodName)}{self._testMethodName[-6:]}")  # sockets: short paths
        self.state = host_state(self.h, self.v535)
        self.sockets = self.state.add_ipc()
        self.addCleanup(lambda: [s.close() for s in self.sockets])

    def check(self):
        r = self.host("--json", "check", root=self.h.root)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(r.returncode == 0, j["ready"])
        return r.returncode, {(f["severity"], f["check"]): f["message"] for f in j["findings"]}, j

    def assertFinding(self, severity, check, text):
        rc, found, j = self.check()
        self.assertIn((severity, check), found, j)
        self.assertIn(text, found[(severity, check)])
        self.assertEqual(rc, 1 if severity == "error" else 0, j)

    def pci(self, name="0000:18:00.0"):
        return self.h.p(f"/sys/devices/pci0000:00/{name}")

    def test_a_good_host_is_ready(self):
        rc, found, j = self.check()
        self.assertEqual((rc, found), (0, {}), j)
        self.assertEqual(j["driver_version"], self.v535)
        r = self.host("check", root=self.h.root)
        self.assertIn(f"Host ready for GPU machines (driver {self.v535})", r.stdout)

    def test_a_gpu_bound_to_another_driver_or_none(self):
        os.unlink(os.path.join(self.pci(), "driver"))
        os.symlink("../../../bus/pci/drivers/vfio-pci", os.path.join(self.pci(), "driver"))
        self.assertFinding("error", "pci", "PCI function 0000:18:00.0 (NVIDIA, class 0x030200) is bound to vfio-pci, not nvidia")
        os.unlink(os.path.join(self.pci(), "driver"))
        self.assertFinding("error", "pci", "is bound to no driver")

    def test_other_vendors_and_classes_are_not_checked(self):
        for name, vendor, cls in (("0000:03:00.0", "0x8086", "0x030000"), ("0000:04:00.0", "0x10de", "0x040300")):
            write(os.path.join(self.pci(name), "vendor"), vendor + "\n")
            write(os.path.join(self.pci(name), "class"), cls + "\n")
            os.symlink(f"../../../devices/pci0000:00/{name}", self.h.p(f"/sys/bus/pci/devices/{name}"))
        self.assertEqual(self.check()[:2], (0, {}))

    def test_modules(self):
        os.rmdir(self.h.p("/sys/module/nvidia_uvm"))
        self.assertFinding("error", "modules", "Kernel module nvidia_uvm is not loaded")

    def test_a_headless_host_without_nvidia_modeset_is_ready_with_a_warning(self):
        os.rmdir(self.h.p("/sys/module/nvidia_modeset"))
        self.assertFinding("warning", "modules", "Kernel module nvidia_modeset is not loaded")  # exit 0: ready

    def test_drm_nodes_without_nvidia_drm(self):
        make_chardev(self.h.p("/dev/dri/card1"), 226, 1)
        self.assertFinding("warning", "modules", "nvidia_drm is not loaded")
        os.makedirs(self.h.p("/sys/module/nvidia_drm"))
        self.assertEqual(self.check()[:2], (0, {}))

    def test_nodes(self):
        os.unlink(self.h.p("/dev/nvidia-uvm"))
        self.assertFinding("error", "nodes", "/dev/nvidia-uvm is missing")
        self.state.add_control_nodes()
        os.unlink(self.h.p("/dev/nvidia0"))
        self.assertFinding("error", "nodes", "(0000:18:00.0)")
        make_chardev(self.h.p("/dev/nvidia0"), 1, 1)  # /dev/mem's numbers
        self.assertFinding("error", "nodes", "Ignoring /dev/nvidia0: it is 1:1")

    def test_userspace_of_another_version(self):
        self.state.set_proc_version("550.163.01")
        rc, found, j = self.check()
        self.assertEqual(rc, 1)
        self.assertIn("550.163.01", found[("error", "userspace")])

    def test_no_userspace_at_all(self):
        for name in os.listdir(self.h.p(f"{LIB}/nvidia/current")):
            if name.startswith("libcuda"):
                os.unlink(self.h.p(f"{LIB}/nvidia/current/{name}"))
        for name in os.listdir(self.h.p(LIB)):
            if name.startswith("libcuda"):
                os.unlink(self.h.p(f"{LIB}/{name}"))
        self.assertFinding("error", "userspace", "Failed to find the driver of the loaded module on this host")

    def test_gsp_firmware(self):
        shutil.rmtree(self.h.p(f"/lib/firmware/nvidia/{self.v535}"))
        self.assertFinding("warning", "firmware", "No GSP firmware")
        self.state.set_proc_version(self.v535, open_module=True)
        self.assertFinding("error", "firmware", "the open kernel module needs it")

    def test_daemons(self):
        os.unlink(self.h.p("/run/nvidia-persistenced/socket"))
        self.assertFinding("warning", "persistence", "nvidia-persistenced is not running")
        write(self.h.p("/proc/4242/comm"), "nvidia-persiste\n")
        self.assertEqual(self.check()[:2], (0, {}))
        self.state.add_fabric(nvswitches=[0])
        os.unlink(self.h.p("/run/nvidia-fabricmanager/socket"))
        self.assertFinding("error", "fabric", "the fabric manager is not running")
        write(self.h.p("/proc/4243/comm"), "nv-fabricmanage\n")
        self.assertEqual(self.check()[:2], (0, {}))
        self.state.add_imex_channels(range(2))
        self.assertFinding("warning", "fabric", "no nvidia-imex daemon runs")
        write(self.h.p("/proc/4244/comm"), "nvidia-imex\n")
        self.assertEqual(self.check()[:2], (0, {}))

    def test_hostile_sysfs_and_proc_entries_are_not_believed_and_do_not_block(self):
        vendor = os.path.join(self.pci(), "vendor")
        os.unlink(vendor)
        os.mkfifo(vendor)  # would block a reader that opened it without O_NONBLOCK
        os.unlink(self.h.p("/run/nvidia-persistenced/socket"))  # so that the processes are looked at
        os.makedirs(self.h.p("/proc/4242"))
        os.mkfifo(self.h.p("/proc/4242/comm"))
        self.assertFinding("error", "pci", "No NVIDIA display or 3D controller")
        self.assertIn("nvidia-persistenced is not running", self.check()[1][("warning", "persistence")])
        os.unlink(vendor)
        os.symlink("/proc/self/environ", vendor)
        self.assertFinding("error", "pci", "No NVIDIA display or 3D controller")
        os.unlink(vendor)
        write(vendor, "0x10de\n" + "x" * (1 << 20))  # larger than any sysfs attribute
        self.assertFinding("error", "pci", "No NVIDIA display or 3D controller")
        write(vendor, "0x10de\n")
        # A link out of the root, to a function that would be an unbound GPU if it were followed there.
        decoy = tempfile.mkdtemp(prefix="decoy-", dir=self.tmp)
        write(os.path.join(decoy, "vendor"), "0x10de\n")
        write(os.path.join(decoy, "class"), "0x030200\n")
        os.unlink(self.h.p("/sys/bus/pci/devices/0000:18:00.0"))
        os.symlink("../../../" * 12 + decoy.lstrip("/"), self.h.p("/sys/bus/pci/devices/0000:18:00.0"))
        self.assertFinding("error", "pci", "No NVIDIA display or 3D controller")
        os.symlink(decoy, self.h.p("/sys/bus/pci/devices/0000:19:00.0"))  # absolute: the root's own path, not the host's
        self.assertFinding("error", "pci", "No NVIDIA display or 3D controller")


class TestCredentials(unittest.TestCase):
    """Item 4: expected_gpus, enabled and the GPUs assigned, passed by the host as credentials, override the
    image's file, and verify says where each value came from."""

    CREDS = "/run/credentials/@system"

    def machine(self, count=1, **creds):
        m = MachineRoot(self).standard(gpus=count)
        for name, value in creds.items():
            write(m.p(f"{self.CREDS}/unbounded-nvidia.{name}"), value + "\n", 0o400)
        return m

    def verify(self, m, env=None):
        r = m.run("--json", "verify", env=env)
        return r.returncode, json.loads(r.stdout)

    def test_expected_gpus_from_the_host_overrides_the_file(self):
        m = self.machine(expected_gpus="2")
        m.config("expected_gpus: 1\n")
        self.assertEqual(m.setup().returncode, 0)
        rc, j = self.verify(m)
        self.assertEqual((rc, j["outcome"]), (1, "gpus-missing"), j)
        self.assertIn("expected_gpus is 2 but the machine offers 1", j["problems"][0]["message"])
        self.assertEqual(j["settings"]["expected_gpus"],
                         {"value": 2, "from": f"credential unbounded-nvidia.expected_gpus ({self.CREDS})"})
        self.assertEqual(j["settings"]["enabled"], {"value": "auto", "from": "default"})

    def test_the_file_s_value_is_said_to_be_the_file_s(self):
        m = self.machine()
        m.config("expected_gpus: 1\n")
        m.setup()
        rc, j = self.verify(m)
        self.assertEqual(rc, 0, j)
        self.assertEqual(j["settings"]["expected_gpus"]["from"], m.p("/etc/unbounded/nvidia.yaml"))

    def test_assigned_gpus_must_each_be_offered(self):
        m = self.machine(count=2, gpus="GPU-00000000-1111-2222-3333-444455556666, 19:00.0")
        m.setup()
        rc, j = self.verify(m)
        self.assertEqual(rc, 0, j)
        self.assertEqual(j["settings"]["expected_gpus"]["value"], 2)
        os.unlink(m.p("/dev/nvidia1"))
        m.setup()
        rc, j = self.verify(m)
        self.assertEqual(rc, 1, j)
        text = " ".join(p["message"] for p in j["problems"])
        self.assertIn("assigned by credential unbounded-nvidia.gpus", text)
        self.assertIn("not offered: 19:00.0", text)

    def test_an_assigned_gpu_missing_is_named_even_when_the_count_is_met(self):
        m = self.machine(count=2, gpus="GPU-00000000-1111-2222-3333-444455556666,GPU-0000000f-1111-2222-3333-444455556666",
                         expected_gpus="2")
        m.setup()
        rc, j = self.verify(m)
        self.assertEqual(rc, 1, j)
        self.assertIn("not offered: GPU-0000000f-1111-2222-3333-444455556666", " ".join(p["message"] for p in j["problems"]))

    def test_systemd_252_s_link_to_nspawn_s_directory_is_followed_inside_the_root(self):
        m = self.machine()
        write(m.p("/run/host/credentials/unbounded-nvidia.expected_gpus"), "3\n", 0o400)
        os.makedirs(m.p("/run/credentials"), exist_ok=True)
        os.symlink("../host/credentials", m.p(self.CREDS))
        m.setup()
        self.assertEqual(self.verify(m)[1]["settings"]["expected_gpus"]["value"], 3)
        os.unlink(m.p(self.CREDS))
        os.symlink("/run/host/credentials", m.p(self.CREDS))  # absolute: the root's, not this machine's /run
        self.assertEqual(self.verify(m)[1]["settings"]["expected_gpus"]["value"], 3)

    def unit_credentials(self, name, value):
        """A unit's own $CREDENTIALS_DIRECTORY holding one credential."""
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        write(os.path.join(d, name), value + "\n")
        return d

    def test_credentials_directory_of_the_unit_comes_first(self):
        m = self.machine(expected_gpus="3")
        d = self.unit_credentials("unbounded-nvidia.expected_gpus", "1")
        m.setup()
        rc, j = self.verify(m, env={"CREDENTIALS_DIRECTORY": d})
        self.assertEqual(rc, 0, j)
        self.assertEqual(j["settings"]["expected_gpus"]["from"], f"credential unbounded-nvidia.expected_gpus ({d})")

    def test_the_unit_s_credentials_do_not_hide_the_host_s(self):
        m = self.machine(expected_gpus="3")
        d = self.unit_credentials("some-other.credential", "x")
        m.setup()
        _, j = self.verify(m, env={"CREDENTIALS_DIRECTORY": d})
        self.assertEqual(j["settings"]["expected_gpus"]["from"], f"credential unbounded-nvidia.expected_gpus ({self.CREDS})")

    def test_a_bad_or_hostile_credential_is_a_usage_error_naming_it(self):
        for value in ("many", "0", "99999"):
            m = self.machine(expected_gpus=value)
            r = m.run("verify")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"credential unbounded-nvidia.expected_gpus ({self.CREDS}): '{value}' is not a number", r.stderr)
        m = self.machine()
        os.makedirs(m.p(self.CREDS))
        os.mkfifo(m.p(f"{self.CREDS}/unbounded-nvidia.enabled"))  # would block a reader without O_NONBLOCK
        r = m.run("verify", timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unbounded-nvidia.enabled", r.stderr)

    def test_the_host_s_kill_switch_turns_the_generator_off(self):
        m = self.machine(enabled="no")
        m.config("enabled: true\n")
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        r = self.generate(m, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        units = [f for _, _, files in os.walk(out) for f in files]
        self.assertNotIn("unbounded-nvidia-setup.service", units)
        write(m.p(f"{self.CREDS}/unbounded-nvidia.enabled"), "yes\n")
        r = self.generate(m, out)
        self.assertIn("unbounded-nvidia-setup.service", [f for _, _, files in os.walk(out) for f in files])

    def generate(self, m, out=None):
        """The generator as PID 1 of an nspawn machine runs it; returns its result (and fills `out`)."""
        if out is None:
            out = tempfile.mkdtemp()
            self.addCleanup(shutil.rmtree, out, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
        env["UNBOUNDED_NVIDIA_ROOT"] = m.path
        env["SYSTEMD_VIRTUALIZATION"] = "container:systemd-nspawn"
        r = subprocess.run([os.environ["GENERATOR_BIN"], out, out, out], capture_output=True, text=True, env=env)
        r.units = [f for _, _, files in os.walk(out) for f in files]
        return r

    def test_the_host_s_kill_switch_wins_over_every_other_error(self):
        """enabled=no from the host: no setup unit, whatever the image's file or another setting says
        (a typo in either once made the generator fall back to defaults and hold containerd back)."""
        for config, creds in (("stagin_timeout: 30s\n", {}), ("enabled: true\n", {"gpus": "not a list!"}),
                              ("", {"expected_gpus": "many"})):
            with self.subTest(config=config, creds=creds):
                m = self.machine(enabled="no", **creds)
                m.config(config)
                r = self.generate(m)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn("unbounded-nvidia-setup.service", r.units)
                self.assertIn("ignored, the host switched this machine off", r.stderr)
                v = m.run("--json", "verify")
                self.assertEqual(json.loads(v.stdout)["settings"]["enabled"],
                                 {"value": "false", "from": f"credential unbounded-nvidia.enabled ({self.CREDS})"})

    def test_the_host_s_settings_directory_is_read_and_named(self):
        """What `binds --credentials --enabled` writes reaches the machine as files of a directory bound
        read-only at /run/host-nvidia-settings (no nspawn reads SetCredential= from a .nspawn file)."""
        m = self.machine()
        write(m.p("/run/host-nvidia-settings/unbounded-nvidia.expected_gpus"), "2\n")
        m.config("expected_gpus: 1\n")
        m.setup()
        rc, j = self.verify(m)
        self.assertEqual((rc, j["outcome"]), (1, "gpus-missing"), j)
        self.assertEqual(j["settings"]["expected_gpus"],
                         {"value": 2, "from": "host setting unbounded-nvidia.expected_gpus (/run/host-nvidia-settings)"})
        write(m.p("/run/host-nvidia-settings/unbounded-nvidia.enabled"), "no\n")
        self.assertNotIn("unbounded-nvidia-setup.service", self.generate(m).units)


if __name__ == "__main__":
    main()
