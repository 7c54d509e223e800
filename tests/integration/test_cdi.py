#!/usr/bin/env python3
"""The CDI spec (golden files, schema, atomic writes) and `verify`, on fake machine roots."""

import json
import os
import random
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

from unbounded_tests.cdi_case import SPEC, CdiCase, fake_hook
from unbounded_tests.harness import (ARCH, IS_ROOT, PLUGIN_SPEC, SETUP, V1, V2, MachineRoot, fixture, main, pe_image, plugin_spec,
                                     snapshot, write)

# What `nvidia-cdi-hook --help` lists (urfave/cli), for toolkit 1.17 and 1.18.
HOOK_1_17 = ["create-symlinks", "enable-cuda-compat", "update-ldcache", "chmod", "help, h"]
HOOK_1_18 = HOOK_1_17[:-1] + ["disable-device-node-modification", "help, h"]


class TestGolden(CdiCase):
    def check(self, m, name):
        spec = self.generate(m)
        self.assertSchemaValid(spec)
        self.assertGolden(name, spec)
        with open(m.p(SPEC)) as f:
            self.assertEqual(f.read(), spec, "setup and generate-cdi disagree")
        return spec

    def test_one_gpu(self):
        spec = self.check(self.ready_machine(gpus=1), "1-gpu.yaml")
        self.assertIn('name: "0"', spec)
        self.assertIn("name: GPU-00000000-1111-2222-3333-444455556666", spec)
        self.assertIn("name: all", spec)
        self.assertIn("cdiVersion: 0.5.0", spec)

    def test_eight_gpus(self):
        spec = self.check(self.ready_machine(gpus=8), "8-gpus.yaml")
        for i in range(8):
            self.assertIn(f'name: "{i}"', spec)

    def test_no_proc_driver_nvidia(self):
        m = MachineRoot(self).standard(gpus=2)
        shutil.rmtree(m.p("/proc/driver/nvidia"))
        self.assertEqual(m.setup().returncode, 0)
        spec = self.check(m, "no-proc.yaml")
        self.assertNotIn("GPU-", spec)

    def test_uninitialised_uuids(self):
        m = MachineRoot(self).standard(gpus=0)
        m.add_gpu(0, "0000:18:00.0", "GPU-????????-????-????-????-????????????")
        m.add_gpu(1, "0000:3b:00.0", "GPU-00000001-1111-2222-3333-444455556666")
        self.assertEqual(m.setup().returncode, 0)
        spec = self.check(m, "uninitialised-uuids.yaml")
        self.assertNotIn("?", spec)
        self.assertIn("GPU-00000001-1111-2222-3333-444455556666", spec)

    def test_a_machine_given_gpus_2_and_3_of_8(self):
        """Issue 24, item 3: /proc/driver/nvidia/gpus lists the host's eight; the machine has /dev/nvidia2 and
        /dev/nvidia3. The spec offers those two as 0 and 1 (PCI order, as NVML numbers them), by UUID and in
        all, and names none of the others; they are one warning."""
        m = MachineRoot(self).standard(gpus=8)
        for minor in (0, 1, 4, 5, 6, 7):
            os.unlink(m.p(f"/dev/nvidia{minor}"))
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = self.check(m, "gpus-2-and-3-of-8.yaml")
        self.assertIn("GPU-00000002-1111-2222-3333-444455556666", spec)
        for i in (0, 1, 4, 5, 6, 7):
            self.assertNotIn(f"/dev/nvidia{i}\n", spec)
            self.assertNotIn(f"GPU-{i:08x}-", spec)
        unbound = [w for w in r.result["warnings"] if "have no /dev/nvidia<minor>" in w]
        self.assertEqual(len(unbound), 1, r.result["warnings"])
        self.assertIn("6 of the 8 GPU(s)", unbound[0])
        self.assertIn("0000:18:00.0, 0000:19:00.0, 0000:1c:00.0, 0000:1d:00.0, 0000:1e:00.0, 0000:1f:00.0", unbound[0])
        self.assertEqual(m.run("verify").returncode, 0)

    def test_no_listed_gpu_bound_is_a_failure(self):
        m = self.ready_machine(gpus=2)
        before = snapshot(m.driver_root())
        with open(m.p(SPEC)) as f:
            spec_before = f.read()
        for minor in (0, 1):
            os.unlink(m.p(f"/dev/nvidia{minor}"))
        r = m.setup()
        self.assertEqual(r.returncode, 1)
        self.assertIn("None of the 2 GPU(s) in /proc/driver/nvidia/gpus has its /dev/nvidia<minor> in this machine", r.stderr)
        self.assertIn("0000:18:00.0, 0000:19:00.0", r.stderr)
        self.assertEqual(snapshot(m.driver_root()), before)
        with open(m.p(SPEC)) as f:
            self.assertEqual(f.read(), spec_before)

    def test_with_hook_binary(self):
        m = MachineRoot(self).standard(gpus=1)
        write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(HOOK_1_18), 0o755)
        self.assertEqual(m.setup().returncode, 0)
        spec = self.check(m, "1-gpu-hook.yaml")
        for hook in ("create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification"):
            self.assertIn(hook, spec)
        self.assertIn(f"libcuda.so.{V1}::/lib/{ARCH}/libcuda.so.1", spec)

    def test_only_the_hooks_the_installed_hook_has(self):
        """Issue 12, item 3: a 1.17 nvidia-cdi-hook has no disable-device-node-modification; a spec that
        names it makes every container fail to start."""
        m = MachineRoot(self).standard(gpus=1)
        write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(HOOK_1_17), 0o755)
        self.assertEqual(m.setup().returncode, 0)
        spec = open(m.p(SPEC)).read()
        for hook in ("create-symlinks", "enable-cuda-compat", "update-ldcache"):
            self.assertIn(hook, spec)
        self.assertNotIn("disable-device-node-modification", spec)
        self.assertSchemaValid(spec)

    def test_a_hook_that_cannot_say_what_it_has_gets_no_hooks(self):
        m = MachineRoot(self).standard(gpus=1)
        write(m.p("/usr/bin/nvidia-cdi-hook"), "#!/bin/sh\nexit 1\n", 0o755)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = open(m.p(SPEC)).read()
        self.assertNotIn("hooks:", spec)
        self.assertIn(f"containerPath: /lib/{ARCH}/libcuda.so.1", spec)  # the link names, bound as files
        self.assertIn("nvidia-cdi-hook", r.stderr)

    def test_the_hook_is_asked_once_until_it_changes(self):
        m = MachineRoot(self).standard(gpus=1)
        log = m.p("/hook-runs")
        write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(HOOK_1_18, log), 0o755)
        for _ in range(3):
            self.assertEqual(m.setup().returncode, 0)
        self.assertEqual(open(log).read().count("run"), 1)
        self.assertEqual(m.run("verify").returncode, 0)
        self.assertEqual(open(log).read().count("run"), 1)
        write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(HOOK_1_17, log), 0o755)  # upgraded (downgraded) hook
        self.assertEqual(m.setup().returncode, 0)
        self.assertEqual(open(log).read().count("run"), 2)
        self.assertNotIn("disable-device-node-modification", open(m.p(SPEC)).read())

    def gone(self, pid_file):
        """True when the process whose pid is in pid_file no longer exists (a zombie is gone enough:
        it runs nothing), waiting a moment for its reaper."""
        pid = int(open(pid_file).read())
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return True
            except FileNotFoundError:
                return True
            time.sleep(0.05)
        os.kill(pid, 9)
        return False

    def test_a_hook_whose_child_keeps_stdout_open_is_judged_by_its_exit(self):
        """Issue 26, item 8: a hook that prints its commands and exits 0 while a child it started keeps
        stdout open was judged "not exit 0 within 2 s"; the child outlived setup, as root."""
        m = MachineRoot(self).standard(gpus=1)
        pid_file = m.p("/hook-child")
        hook = fake_hook(HOOK_1_18).replace("#!/bin/sh\n", f"#!/bin/sh\nsleep 30 &\necho $! > {pid_file}\n", 1)
        write(m.p("/usr/bin/nvidia-cdi-hook"), hook, 0o755)
        started = time.monotonic()
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - started, 30)
        self.assertNotIn("nvidia-cdi-hook", r.stderr)
        self.assertIn("update-ldcache", open(m.p(SPEC)).read())
        self.assertTrue(self.gone(pid_file), "the hook's child outlived setup")

    def test_a_hook_that_hangs_is_killed_with_its_children(self):
        m = MachineRoot(self).standard(gpus=1)
        pid_file = m.p("/hook-child")
        write(m.p("/usr/bin/nvidia-cdi-hook"), f"#!/bin/sh\nsleep 30 &\necho $! > {pid_file}\nwait\n", 0o755)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("did not list its commands", r.stderr)
        self.assertNotIn("hooks:", open(m.p(SPEC)).read())
        self.assertTrue(self.gone(pid_file), "the hung hook's child outlived setup")

    def test_debian_s_dlss_dlls_in_the_flavour_directory(self):
        """Debian installs them in nvidia/current/nvidia/wine/ of the lib dir (the flavour's own
        directory), which setup never looked into; another flavour's (another driver's) are not taken."""
        m = MachineRoot(self).standard(gpus=1, layout="debian")
        lib = m.p("/run/host-nvidia/0")
        for flavour, payload in (("current", b" this driver's"), ("tesla-470", b" another driver's")):
            wine = os.path.join(lib, "nvidia", flavour, "nvidia/wine")
            os.makedirs(wine)
            write(os.path.join(wine, "_nvngx.dll"), pe_image(payload))
        shutil.copy(fixture(f"libcuda.so.{V2}"), os.path.join(lib, "nvidia/tesla-470"))
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        dll = m.p(f"/run/nvidia/driver/lib/{ARCH}/nvidia/wine/_nvngx.dll")
        with open(dll, "rb") as f:
            self.assertTrue(f.read().endswith(b" this driver's"))
        self.assertIn(f"hostPath: /run/nvidia/driver/lib/{ARCH}/nvidia/wine/_nvngx.dll\n", open(m.p(SPEC)).read())

    def test_the_libraries_not_named_by_version(self):
        """Issue 25, item 2: libnvidia-api.so.1 (NVAPI, which DXVK-NVAPI and Proton load for DLSS) carries no
        driver version in its name, and the DLSS DLLs Proton copies into a game's prefix are Windows files
        in nvidia/wine/ beside the lib dir: none of them matched *.so.<version>, so no pod had them."""
        m = MachineRoot(self).standard(gpus=1)
        lib = m.p("/run/host-nvidia/0")
        shutil.copy(fixture("libnvidia-api.so.1"), lib)
        wine = os.path.join(lib, "nvidia/wine")
        os.makedirs(wine)
        write(os.path.join(wine, "nvngx.dll"), pe_image(b" a PE file"))
        write(os.path.join(wine, "_nvngx.dll"), pe_image(b" another PE file"))
        write(os.path.join(wine, "nvngx_dlssg.dll"), "MZ not one we take")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = open(m.p(SPEC)).read()
        self.assertSchemaValid(spec)
        for path in (f"lib/{ARCH}/libnvidia-api.so.1", f"lib/{ARCH}/nvidia/wine/nvngx.dll", f"lib/{ARCH}/nvidia/wine/_nvngx.dll"):
            self.assertIn(f"hostPath: /run/nvidia/driver/{path}\n      containerPath: /{path}\n", spec)
            self.assertTrue(os.path.isfile(m.p(f"/run/nvidia/driver/{path}")), path)
        self.assertNotIn("nvngx_dlssg", spec)
        self.assertEqual(m.run("verify").returncode, 0)

        # Not what the names say: skipped with a warning, the run goes on.
        write(os.path.join(wine, "nvngx.dll"), "#!/bin/sh\n")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"Skipping /run/host-nvidia/0/nvidia/wine/nvngx.dll: not a Windows PE file", r.stderr)
        self.assertNotIn("wine/nvngx.dll", open(m.p(SPEC)).read())
        self.assertIn("wine/_nvngx.dll", open(m.p(SPEC)).read())

    OPTIX_DATA = bytes.fromhex("7ada0700204e00000013010000000000") * 256  # the real file's first bytes, repeated

    def optix_machine(self, layout):
        """libnvoptix1 as Debian installs it (dpkg -c: nvidia/current/{libnvoptix.so.<v>, libnvoptix.so.1,
        nvoptix.bin}), or as Ubuntu does (the library in the lib dir, the data in /usr/share/nvidia,
        which the host binds as a staging tree of its own)."""
        m = MachineRoot(self)
        m.stage_all(V1, layout=layout)
        m.set_proc_version(V1)
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        lib = m.p("/run/host-nvidia/0/nvidia/current" if layout == "debian" else "/run/host-nvidia/0")
        shutil.copy(fixture(f"libnvoptix.so.{V1}"), lib)
        os.symlink(f"libnvoptix.so.{V1}", os.path.join(lib, "libnvoptix.so.1"))
        data = lib if layout == "debian" else m.p("/run/host-nvidia/3")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "nvoptix.bin"), "wb") as f:
            f.write(self.OPTIX_DATA)
        return m

    def test_optix_data_goes_with_libnvoptix(self):
        """Issue 25, item 1: nvoptix.bin, which libnvoptix reads from /usr/share/nvidia: Debian ships it
        beside the library, Ubuntu in /usr/share/nvidia."""
        for layout in ("debian", "ubuntu"):
            m = self.optix_machine(layout)
            r = m.setup()
            self.assertEqual(r.returncode, 0, r.stderr)
            spec = self.check(m, f"1-gpu-optix-{layout}.yaml")
            self.assertIn("hostPath: /run/nvidia/driver/usr/share/nvidia/nvoptix.bin\n"
                          "      containerPath: /usr/share/nvidia/nvoptix.bin\n", spec, layout)
            self.assertIn(f"containerPath: /lib/{ARCH}/libnvoptix.so.{V1}\n", spec)
            with open(m.p("/run/nvidia/driver/usr/share/nvidia/nvoptix.bin"), "rb") as f:
                self.assertEqual(f.read(), self.OPTIX_DATA, layout)  # a copy: a host upgrade does not change it
            self.assertEqual(m.run("verify").returncode, 0, layout)

    def test_optix_data_is_left_out_without_its_library_or_when_switched_off(self):
        m = self.optix_machine("ubuntu")
        m.config("nvoptix: false\n")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = open(m.p(SPEC)).read()
        self.assertNotIn("nvoptix.bin", spec)
        self.assertIn(f"libnvoptix.so.{V1}", spec)  # the library stays: only the 134 MB of data go
        # No libnvoptix of this driver: nothing reads the file, which is not copied.
        m = self.optix_machine("ubuntu")
        os.unlink(m.p(f"/run/host-nvidia/0/libnvoptix.so.{V1}"))
        self.assertEqual(m.setup().returncode, 0)
        self.assertNotIn("nvoptix", open(m.p(SPEC)).read())
        # The library without its data: said, the run goes on.
        m = self.optix_machine("ubuntu")
        os.unlink(m.p("/run/host-nvidia/3/nvoptix.bin"))
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("its nvoptix.bin is not in the staging mounts: OptiX fails in containers", r.stderr)

    def ipc_machine(self):
        m = MachineRoot(self).standard(gpus=1)
        socks = m.add_ipc()
        self.addCleanup(lambda: [s.close() for s in socks])
        return m

    def test_ipc_sockets_present_in_the_machine_are_mounted(self):
        """Issue 25, item 3: persistenced's and the fabric manager's sockets and the MPS pipe directory,
        as nvidia-ctk's IPC discoverer mounts them, each only while it is there."""
        m = self.ipc_machine()
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = self.check(m, "1-gpu-ipc.yaml")
        for p in ("/run/nvidia-persistenced/socket", "/run/nvidia-fabricmanager/socket", "/tmp/nvidia-mps"):
            self.assertIn(f"hostPath: {p}\n      containerPath: {p}\n", spec)
        self.assertEqual(m.run("verify").returncode, 0)
        # The daemon stopped: verify says which hostPath went, the next run leaves it out.
        os.unlink(m.p("/run/nvidia-fabricmanager/socket"))
        v = m.run("verify")
        self.assertEqual(v.returncode, 1)
        self.assertIn("hostPath /run/nvidia-fabricmanager/socket does not exist", v.stderr)
        self.assertEqual(m.setup().returncode, 0)
        self.assertNotIn("nvidia-fabricmanager", open(m.p(SPEC)).read())
        self.assertEqual(m.run("verify").returncode, 0)

    def test_ipc_sockets_can_be_left_out(self):
        m = self.ipc_machine()
        m.config("ipc_sockets: false\n")
        self.assertEqual(m.setup().returncode, 0)
        spec = open(m.p(SPEC)).read()
        for p in ("/run/nvidia-persistenced", "/run/nvidia-fabricmanager", "/tmp/nvidia-mps"):
            self.assertNotIn(p, spec)

    def test_an_mps_directory_anyone_could_have_made_is_not_mounted(self):
        """/tmp is everyone's: a pipe directory another user owns, or others may write, could hold a fake
        MPS control pipe that every GPU pod would talk to."""
        m = self.ipc_machine()
        for mode, uid in ((0o1777, 0), (0o755, 1000)):
            os.chmod(m.p("/tmp/nvidia-mps"), mode)
            os.chown(m.p("/tmp/nvidia-mps"), uid, 0)
            r = m.setup()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("Not mounting /tmp/nvidia-mps", r.stderr)
            self.assertNotIn("nvidia-mps", open(m.p(SPEC)).read())
        os.rmdir(m.p("/tmp/nvidia-mps"))
        os.symlink("/somewhere", m.p("/tmp/nvidia-mps"))
        r = m.setup()
        self.assertIn("Not mounting /tmp/nvidia-mps", r.stderr)
        self.assertNotIn("nvidia-mps", open(m.p(SPEC)).read())

    def drm_machine(self, hook):
        from unbounded_tests.harness import make_chardev
        m = MachineRoot(self).standard(gpus=2)
        for i, bus in enumerate(("0000:18:00.0", "0000:19:00.0")):
            for node, minor in ((f"card{i + 1}", i + 1), (f"renderD{128 + i}", 128 + i)):
                os.makedirs(m.p(f"/sys/bus/pci/devices/{bus}/drm/{node}"))
                make_chardev(m.p(f"/dev/dri/{node}"), 226, minor)
        write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(hook), 0o755)
        return m

    def test_drm_by_path_links_are_made_by_the_hook(self):
        """Issue 25, item 4: nvidia-ctk gives each GPU's device its /dev/dri/by-path/pci-<bdf>-{card,render}
        links through the create-symlinks hook. A machine's /dev has no udev, so they are made from what
        /sys says of the GPU, not read from /dev/dri/by-path."""
        import yaml
        m = self.drm_machine(HOOK_1_18)
        self.assertEqual(m.setup().returncode, 0)
        spec = self.check(m, "2-gpus-drm-hook.yaml")
        devices = {d["name"]: d["containerEdits"] for d in yaml.safe_load(spec)["devices"]}
        def links(edits):
            out = []
            for h in edits.get("hooks", []):
                if h["args"][1] == "create-symlinks":
                    out += [a for a in h["args"][2:] if a != "--link"]
            return out
        first = ["../card1::/dev/dri/by-path/pci-0000:18:00.0-card", "../renderD128::/dev/dri/by-path/pci-0000:18:00.0-render"]
        second = ["../card2::/dev/dri/by-path/pci-0000:19:00.0-card", "../renderD129::/dev/dri/by-path/pci-0000:19:00.0-render"]
        self.assertEqual(links(devices["0"]), first)
        self.assertEqual(links(devices["GPU-00000000-1111-2222-3333-444455556666"]), first)
        self.assertEqual(links(devices["1"]), second)
        self.assertEqual(links(devices["all"]), first + second)

    def test_no_by_path_links_without_create_symlinks(self):
        m = self.drm_machine(["update-ldcache", "help, h"])
        self.assertEqual(m.setup().returncode, 0)
        spec = open(m.p(SPEC)).read()
        self.assertNotIn("by-path", spec)
        self.assertIn("/dev/dri/card1", spec)

    def test_pci_bus_order_not_minor_order(self):
        m = MachineRoot(self).standard(gpus=0)
        m.add_gpu(3, "0000:18:00.0", "GPU-00000003-1111-2222-3333-444455556666")
        m.add_gpu(0, "0000:af:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        self.assertEqual(m.setup().returncode, 0)
        spec = self.generate(m)
        dev0 = spec[spec.index('name: "0"'):spec.index('name: "1"')]
        self.assertIn("/dev/nvidia3", dev0)

    def test_non_root_group_nodes_need_additional_gids(self):
        m = MachineRoot(self).standard(gpus=1)
        os.chown(m.p("/dev/nvidia0"), 0, 44)
        os.chmod(m.p("/dev/nvidia0"), 0o660)
        self.assertEqual(m.setup().returncode, 0)
        spec = self.generate(m)
        self.assertIn("cdiVersion: 0.7.0", spec)
        self.assertIn("additionalGids:\n        - 44", spec)
        self.assertSchemaValid(spec)


class TestWrite(CdiCase):
    def test_spec_is_0644_and_not_rewritten_when_unchanged(self):
        m = self.ready_machine()
        st = os.stat(m.p(SPEC))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        r = m.setup()
        self.assertEqual(r.returncode, 0)
        self.assertFalse(r.result["cdi_spec_written"])
        self.assertEqual(os.stat(m.p(SPEC)).st_ino, st.st_ino)
        self.assertEqual(sorted(os.listdir(m.p("/etc/cdi"))), ["nvidia.yaml"])

    def test_new_version_rewrites_the_spec_without_stale_paths(self):
        m = self.ready_machine()
        m.clear_staging()
        m.stage_all(V2)
        m.set_proc_version(V2)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.result["cdi_spec_written"])
        spec = open(m.p(SPEC)).read()
        self.assertNotIn(V1, spec)
        self.assertIn(f"libcuda.so.{V2}", spec)

    def test_generate_cdi_to_a_file(self):
        m = self.ready_machine()
        out = m.p("/tmp/out.yaml")
        os.makedirs(os.path.dirname(out))
        r = m.run("generate-cdi", "--output", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(open(out).read(), open(m.p(SPEC)).read())
        self.assertEqual(m.run("--json", "generate-cdi").returncode, 2)

    @unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private tmpfs")
    def test_spec_write_failure_puts_the_old_root_back(self):
        """ENOSPC writing /etc/cdi/nvidia.yaml after the root swap: the old root comes back, so the
        driver root and the spec still describe the same driver."""
        m = self.ready_machine()
        old_spec = open(m.p(SPEC)).read()
        b = MachineRoot(self)
        b.stage_all(V2)
        shutil.move(b.p("/run/host-nvidia"), m.p("/run/host-nvidia-b"))
        write(m.p("/etc/unbounded/b.yaml"), "staging: /run/host-nvidia-b\n")
        m.set_proc_version(V2)
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        spec_dir = m.p("/etc/cdi")
        script = f"""
            set -u
            cp "{spec_dir}/nvidia.yaml" "{out}/saved"
            mount -t tmpfs -o size=20k tmpfs "{spec_dir}" || exit 90
            cp "{out}/saved" "{spec_dir}/nvidia.yaml"
            head -c 4096 /dev/zero > "{spec_dir}/filler" 2>/dev/null
            "{SETUP}" --root "{m.path}" --config "{m.p('/etc/unbounded/b.yaml')}" setup 2>"{out}/err"
            echo $? > "{out}/rc"
            cp "{spec_dir}/nvidia.yaml" "{out}/spec-after"
        """
        before = snapshot(m.driver_root())
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(open(f"{out}/rc").read().strip(), "1")
        err = open(f"{out}/err").read()
        self.assertIn("No space left on device", err)
        self.assertIn("previous driver root was put back", err)
        self.assertEqual(open(f"{out}/spec-after").read(), old_spec)
        self.assertEqual(snapshot(m.driver_root()), before)
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])


class TestImageFamilies(CdiCase):
    """Issue 12, item 5: which container images find libcuda.so.1, with and without nvidia-cdi-hook.

    A model of the container runtime and the image's loader: the spec's mounts are applied to an
    empty image tree (each hostPath copied to its containerPath), its hooks are played as
    nvidia-cdi-hook plays them (create-symlinks makes the links; update-ldcache runs ldconfig for
    the folders it names, so every glibc image's cache has them), and each library is looked up in
    the directories the image family's glibc searches besides its cache: Debian's multiarch patch
    adds /lib/<triplet> and /usr/lib/<triplet>; Red Hat's glibc on lib64 systems (UBI, Rocky, Alma)
    searches /lib64 and /usr/lib64 only. The loaders are not run here: the directory lists are
    glibc's, the rest is the spec."""

    FAMILIES = {"debian": [f"/lib/{ARCH}", f"/usr/lib/{ARCH}", "/lib", "/usr/lib"], "ubi": ["/lib64", "/usr/lib64"]}
    # What a CUDA program loads: libcuda.so.1 by SONAME, and what libcuda dlopen()s by SONAME.
    NEEDED = ["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"]

    def spec_for(self, hook):
        m = MachineRoot(self).standard(gpus=1)
        if hook:
            write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(hook), 0o755)
        self.assertEqual(m.setup().returncode, 0)
        import yaml
        return m, yaml.safe_load(open(m.p(SPEC)).read())

    def image_finds(self, m, doc, family, drop=lambda mount: False):
        image = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, image, True)
        cache = []
        edits = doc["containerEdits"]
        for mount in edits.get("mounts", []):
            if drop(mount):
                continue
            dest = os.path.join(image, mount["containerPath"].lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(m.p(mount["hostPath"]), dest)
        for hook in edits.get("hooks", []):
            args = hook["args"]
            if args[1] == "create-symlinks":
                for target, link in (a.split("::") for a in args[3::2]):
                    dest = os.path.join(image, link.lstrip("/"))
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    if not os.path.lexists(dest):
                        os.symlink(target, dest)
            elif args[1] == "update-ldcache":
                cache += args[3::2]
        found = {}
        for soname in self.NEEDED:
            for d in cache + self.FAMILIES[family]:
                path = os.path.join(image, d.lstrip("/"), soname)
                if os.path.exists(path):
                    found[soname] = open(path, "rb").read()
                    break
        return found

    def assertEveryFamilyFindsTheDriver(self, hook):
        m, doc = self.spec_for(hook)
        for family in self.FAMILIES:
            found = self.image_finds(m, doc, family)
            self.assertEqual(sorted(found), sorted(self.NEEDED), f"{family} image, hook {hook and hook[:3]}")
            for soname, data in found.items():
                real = os.path.join(m.libdir(), soname.rsplit(".so.", 1)[0] + f".so.{V1}")
                self.assertEqual(data, open(real, "rb").read(), f"{family}: {soname} is not the driver's")

    def test_without_a_hook(self):
        self.assertEveryFamilyFindsTheDriver(None)

    def test_with_a_hook_that_updates_the_ld_cache(self):
        self.assertEveryFamilyFindsTheDriver(HOOK_1_17)
        m, doc = self.spec_for(HOOK_1_17)
        self.assertNotIn("/usr/lib64/", open(m.p(SPEC)).read())  # the cache does it: no extra mounts

    def test_with_a_hook_without_update_ldcache(self):
        self.assertEveryFamilyFindsTheDriver(["create-symlinks", "help, h"])

    def test_the_model_fails_an_image_the_spec_does_not_serve(self):
        # Without the /usr/lib64 mounts (the spec before the UBI support), a UBI image finds nothing.
        m, doc = self.spec_for(None)
        self.assertEqual(self.image_finds(m, doc, "ubi", drop=lambda mount: mount["containerPath"].startswith("/usr/lib64/")), {})
        self.assertEqual(len(self.image_finds(m, doc, "debian", drop=lambda mount: mount["containerPath"].startswith("/usr/lib64/"))), 3)


class TestCleanup(CdiCase):
    """Issue 19: `cleanup` removes the spec we wrote (marked on its first line), nothing else."""

    def cleanup(self, m):
        r = m.run("--json", "cleanup")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_the_spec_is_marked_and_cleanup_removes_it(self):
        m = self.ready_machine()
        first = open(m.p(SPEC)).readline()
        self.assertRegex(first, r"^# Written by unbounded-nvidia-setup \S+; removed with it, do not edit$")
        self.assertTrue(self.cleanup(m)["cdi_spec_removed"])
        self.assertFalse(os.path.exists(m.p(SPEC)))
        self.assertFalse(self.cleanup(m)["cdi_spec_removed"])  # nothing left: still fine

    def test_a_spec_someone_else_wrote_is_left_alone(self):
        m = MachineRoot(self)
        foreign = "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"
        write(m.p(SPEC), foreign)
        self.assertFalse(self.cleanup(m)["cdi_spec_removed"])
        self.assertEqual(open(m.p(SPEC)).read(), foreign)

    def test_a_symlink_or_a_fifo_at_the_path_is_not_followed_or_waited_on(self):
        m = self.ready_machine()
        os.rename(m.p(SPEC), m.p("/etc/cdi/ours-elsewhere.yaml"))
        os.symlink("ours-elsewhere.yaml", m.p(SPEC))
        self.assertFalse(self.cleanup(m)["cdi_spec_removed"])
        self.assertTrue(os.path.islink(m.p(SPEC)))
        self.assertTrue(os.path.exists(m.p("/etc/cdi/ours-elsewhere.yaml")))
        os.unlink(m.p(SPEC))
        os.mkfifo(m.p(SPEC))
        self.assertFalse(self.cleanup(m)["cdi_spec_removed"])  # returns at once (run() has a timeout)


class TestVerify(CdiCase):
    def verify(self, m):
        r = m.run("--json", "verify")
        r.result = json.loads(r.stdout)
        return r

    def assertNotReady(self, m, *needles):
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(r.result["ready"])
        text = "\n".join(p["message"] for p in r.result["problems"])
        for n in needles:
            self.assertIn(n, text)
        self.assertIn(needles[0], r.stderr)
        return r

    def test_ready_machine_verifies(self):
        m = self.ready_machine(gpus=2)
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        r = self.verify(m)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.result["ready"])
        self.assertEqual(r.result["problems"], [])
        self.assertEqual(r.result["driver_version"], V1)
        self.assertEqual(r.result["gpus"], 2)

    def test_verify_changes_nothing(self):
        m = self.ready_machine()
        os.unlink(os.path.join(m.libdir(), f"libcuda.so.{V1}"))
        before = snapshot(m.path)
        self.verify(m)
        self.assertEqual(snapshot(m.path), before)

    def test_libcuda_missing(self):
        m = self.ready_machine()
        os.unlink(os.path.join(m.libdir(), f"libcuda.so.{V1}"))
        self.assertNotReady(m, f"/run/nvidia/driver/lib/{ARCH}/libcuda.so.{V1} is missing",
                            f"hostPath /run/nvidia/driver/lib/{ARCH}/libcuda.so.{V1} does not exist")

    def test_libnvidia_ml_truncated(self):
        m = self.ready_machine()
        with open(os.path.join(m.libdir(), f"libnvidia-ml.so.{V1}"), "r+b") as f:
            f.truncate(10)
        self.assertNotReady(m, f"libnvidia-ml.so.{V1} has 10 bytes", "truncated")

    def test_libcuda_replaced_by_a_symlink(self):
        m = self.ready_machine()
        lib = os.path.join(m.libdir(), f"libcuda.so.{V1}")
        os.unlink(lib)
        os.symlink(f"/run/host-nvidia/0/libcuda.so.{V1}", lib)
        self.assertNotReady(m, f"libcuda.so.{V1} is a symlink, expected a regular file")

    def test_spec_missing(self):
        m = self.ready_machine()
        os.unlink(m.p(SPEC))
        self.assertNotReady(m, f"CDI spec {SPEC} is unreadable: No such file or directory")

    def test_spec_truncated(self):
        m = self.ready_machine()
        text = open(m.p(SPEC)).read()
        write(m.p(SPEC), text[: len(text) // 3])
        r = self.assertNotReady(m, SPEC)

    def test_spec_stale(self):
        m = self.ready_machine(gpus=2)
        text = open(m.p(SPEC)).read()
        # A GPU removed since the spec was written: everything in it still exists, but it is stale.
        shutil.rmtree(m.p("/proc/driver/nvidia/gpus/0000:19:00.0"))
        self.assertNotReady(m, "is stale")

    def test_device_node_missing(self):
        m = self.ready_machine()
        os.unlink(m.p("/dev/nvidia-uvm"))
        self.assertNotReady(m, "device node /dev/nvidia-uvm")

    def test_device_node_not_a_character_device(self):
        m = self.ready_machine()
        os.unlink(m.p("/dev/nvidiactl"))
        write(m.p("/dev/nvidiactl"), "")
        self.assertNotReady(m, "/dev/nvidiactl is not a character device")

    def test_driver_root_replaced_by_a_symlink(self):
        m = self.ready_machine()
        os.rename(m.driver_root(), m.p("/run/nvidia/elsewhere"))
        os.symlink("elsewhere", m.driver_root())
        self.assertNotReady(m, "Driver root /run/nvidia/driver is a symlink")

    def test_device_plugin_spec_without_libcuda(self):
        m = self.ready_machine()
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1, with_libcuda=False))
        self.assertNotReady(m, f"{PLUGIN_SPEC} has no mount of libcuda.so.{V1}")

    def test_device_plugin_spec_of_the_old_driver(self):
        m = self.ready_machine()
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V2))
        self.assertNotReady(m, f"{PLUGIN_SPEC} has no mount of libcuda.so.{V1}",
                            f"hostPath /run/nvidia/driver/lib/{ARCH}/libcuda.so.{V2} does not exist")

    def test_device_plugin_spec_not_json(self):
        m = self.ready_machine()
        write(m.p(PLUGIN_SPEC), "cdiVersion: 0.5.0\nkind: [oops\n")
        self.assertNotReady(m, f"Device plugin CDI spec {PLUGIN_SPEC} is not valid JSON")

    def test_kernel_module_upgraded_under_the_root(self):
        m = self.ready_machine()
        m.set_proc_version(V2)
        self.assertNotReady(m, f"Kernel module is {V2} but the driver root holds {V1}")

    def test_host_path_escaping_the_root_is_not_followed(self):
        m = self.ready_machine()
        # A spec whose hostPath is a symlink pointing at an absolute path: resolved inside the root,
        # /etc/hostname of the real machine must not count as present.
        lib = os.path.join(m.libdir(), f"libnvidia-cfg.so.{V1}")
        os.unlink(lib)
        os.symlink("/etc/hostname", lib)
        r = self.assertNotReady(m, f"libnvidia-cfg.so.{V1} is a symlink")
        self.assertIn(f"hostPath /run/nvidia/driver/lib/{ARCH}/libnvidia-cfg.so.{V1} does not exist", r.stderr)

    def test_non_gpu_machine_verifies_as_nothing_to_do(self):
        m = MachineRoot(self)
        r = self.verify(m)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.result["outcome"], "no-gpu")

    def test_malformed_specs_never_crash_verify(self):
        """A generated corpus of damaged specs (byte flips, cuts, insertions) for both parsers: verify
        always answers 1 with messages, never crashes or hangs."""
        m = self.ready_machine()
        good = open(m.p(SPEC)).read()
        plugin = plugin_spec(m, V1)
        rng = random.Random(7)
        for i in range(60):
            for path, text in ((SPEC, good), (PLUGIN_SPEC, plugin)):
                b = bytearray(text.encode())
                for _ in range(rng.randint(1, 6)):
                    op = rng.choice(("flip", "cut", "insert"))
                    pos = rng.randrange(len(b))
                    if op == "flip":
                        b[pos] = rng.choice(b"{}[]:,-\"'\n\t #&*!|>%@`\x00\xff")
                    elif op == "cut":
                        del b[pos:pos + rng.randint(1, 200)]
                    else:
                        b[pos:pos] = rng.choice((b"{", b"- ", b": ", b"\n  ", b"&a ", b"*a", b"!!binary ", b"[" * 40))
                write(m.p(path), bytes(b))
            r = m.run("--json", "verify", timeout=20)
            self.assertIn(r.returncode, (0, 1), f"case {i}: rc={r.returncode}\n{r.stderr}")
            json.loads(r.stdout)
            self.assertNotIn("internal error", r.stderr)
        write(m.p(SPEC), good)


if __name__ == "__main__":
    main()
