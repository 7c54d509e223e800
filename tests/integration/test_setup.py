#!/usr/bin/env python3
"""Integration tests of `unbounded-nvidia-setup setup`: the real binary on fake machine roots."""

import fcntl
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import unittest

from unbounded_tests.harness import ARCH, COMPANIONS, IS_ROOT, SETUP, UNRELATED, V1, V2, MachineRoot, fixture, main, snapshot, write
from unbounded_tests.setup_case import SetupTestCase, expected_files


def pad(path, megabytes):
    """Appends random bytes after the ELF contents (still a valid ELF) to make copies take time."""
    with open(path, "ab") as f:
        f.write(os.urandom(megabytes << 20))


class TestBuild(SetupTestCase):
    def test_complete_root_from_ubuntu_layout(self):
        m = self.machine()
        r = m.setup()
        self.assertSetupOk(r)
        self.assertCompleteRoot(m, V1)
        self.assertEqual(r.result["driver_version"], V1)
        self.assertEqual(r.result["kernel_module_version"], V1)
        self.assertEqual(r.result["files"], len(expected_files(V1)))
        self.assertGreater(r.result["bytes_copied"], 0)
        # libcuda and libnvidia-ml are byte-identical to staging
        for lib in ("libcuda", "libnvidia-ml"):
            with open(m.p(f"/run/host-nvidia/0/{lib}.so.{V1}"), "rb") as a, \
                    open(os.path.join(m.libdir(), f"{lib}.so.{V1}"), "rb") as b:
                self.assertEqual(a.read(), b.read())

    def test_firmware_dir_bound_as_a_staging_mount_itself(self):
        """Issue 12, item 4: the README binds the host's /lib/firmware/nvidia as a staging mount: its
        <version>/ directories are then at the tree's root, and their firmware goes into the root."""
        m = MachineRoot(self)
        m.stage_ubuntu(V1)
        m.stage_bin(V1)
        fw = m.p(f"/run/host-nvidia/2/{V1}")
        for name in ("gsp_ga10x.bin", "gsp_tu10x.bin"):
            write(os.path.join(fw, name), (V1 + name).encode() * 100)
        m.set_proc_version(V1)
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        r = m.setup()
        self.assertSetupOk(r)
        for name in ("gsp_ga10x.bin", "gsp_tu10x.bin"):
            self.assertTrue(os.path.isfile(m.p(f"/run/nvidia/driver/lib/firmware/nvidia/{V1}/{name}")))
        self.assertFalse(any("GSP firmware" in w for w in r.result["warnings"]), r.result["warnings"])

    def test_a_driver_without_its_gsp_firmware_is_warned_about(self):
        m = MachineRoot(self)
        m.stage_ubuntu(V1)
        m.stage_bin(V1)
        m.set_proc_version(V1)
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        r = m.setup()
        self.assertSetupOk(r)
        self.assertTrue(any(w.startswith(f"No GSP firmware for driver {V1} in the staging mounts") for w in r.result["warnings"]),
                        r.result["warnings"])

    def test_complete_root_from_debian_layout_with_absolute_links(self):
        m = MachineRoot(self)
        m.stage_debian(V1)
        m.stage_bin(V1)
        m.stage_firmware(V1)
        # Debian ships vdpau and the EGL companions elsewhere; add them the Ubuntu way in a 4th tree.
        d = m.p("/run/host-nvidia/3")
        os.makedirs(os.path.join(d, "vdpau"))
        shutil.copy(fixture(f"libvdpau_nvidia.so.{V1}"), os.path.join(d, "vdpau", f"libvdpau_nvidia.so.{V1}"))
        for name in COMPANIONS:
            shutil.copy(fixture(name), os.path.join(d, name))
        m.set_proc_version(V1)
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        r = m.setup()
        self.assertSetupOk(r)
        # libnvidia-nvvm's version-named alternatives link in the lib dir leads outside the staging
        # mounts; the real file in nvidia/current/ is taken, the link skipped with a note.
        nvvm = f"libnvidia-nvvm.so.{V1}"
        self.assertCompleteRoot(m, V1, extra_files={f"lib/{ARCH}/{nvvm}"}, extra_links={f"lib/{ARCH}/libnvidia-nvvm.so.4": nvvm})
        self.assertEqual(len(r.result["notes"]), 1, r.result["notes"])
        self.assertIn(f"Skipping /run/host-nvidia/0/{nvvm}", r.result["notes"][0])

    def test_absolute_chain_across_staging_trees(self):
        m = self.machine()
        lib = m.p(f"/run/host-nvidia/0/libcuda.so.{V1}")
        real = m.p(f"/run/host-nvidia/5/real/libcuda.so.{V1}")
        os.makedirs(os.path.dirname(real))
        shutil.move(lib, real)
        # libcuda.so.V -> /usr/lib/<arch>/libcuda.real -> /opt/nvidia/real/libcuda.so.V (tree 5)
        os.symlink(f"/usr/lib/{ARCH}/libcuda.real", lib)
        os.symlink(f"/opt/nvidia/real/libcuda.so.{V1}", m.p("/run/host-nvidia/0/libcuda.real"))
        r = m.setup()
        self.assertSetupOk(r)
        self.assertCompleteRoot(m, V1)

    def test_only_driver_files_taken_from_a_whole_host_lib_dir(self):
        m = MachineRoot(self).standard(extra_unrelated=2000)
        r = m.setup()
        self.assertSetupOk(r)
        self.assertCompleteRoot(m, V1)
        names = {n for _, _, fs in os.walk(m.driver_root()) for n in fs}
        for u in UNRELATED + ["unrelated-tool"]:
            self.assertNotIn(u, names)

    def test_setuid_bits_never_copied(self):
        m = MachineRoot(self)
        m.stage_ubuntu(V1, setuid=True)
        m.stage_bin(V1, setuid_smi=True)
        m.stage_firmware(V1)
        m.set_proc_version(V1)
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        self.assertSetupOk(m.setup())
        self.assertCompleteRoot(m, V1)

    def test_open_kernel_module_version_and_missing_proc(self):
        m = self.machine()
        m.set_proc_version(V1, open_module=True)
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["kernel_module_version"], V1)
        os.unlink(m.p("/proc/driver/nvidia/version"))
        shutil.rmtree(m.driver_root())
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["kernel_module_version"], "")
        self.assertCompleteRoot(m, V1)

    def test_unchanged_rerun_copies_nothing(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        before = snapshot(m.driver_root())
        ino = os.stat(os.path.join(m.libdir(), f"libcuda.so.{V1}")).st_ino
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["bytes_copied"], 0)
        self.assertEqual(r.result["files_copied"], 0)
        self.assertTrue(r.result["unchanged"])
        self.assertEqual(snapshot(m.driver_root()), before)
        self.assertEqual(os.stat(os.path.join(m.libdir(), f"libcuda.so.{V1}")).st_ino, ino)

    def test_one_changed_source_copies_one_file_and_links_the_rest(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        src = m.p(f"/run/host-nvidia/0/libnvidia-cfg.so.{V1}")
        pad(src, 1)
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["files_copied"], 1)
        self.assertEqual(r.result["bytes_copied"], os.path.getsize(src))
        self.assertEqual(r.result["files_reused"], r.result["files"] - 1)
        with open(src, "rb") as a, open(os.path.join(m.libdir(), f"libnvidia-cfg.so.{V1}"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_discovery_cache_sees_every_staging_change(self):
        """The memo of listings and ELF facts must never hide a change: a file added to a staging
        directory, a library rewritten in place, a damaged cache."""
        m = self.machine()
        self.assertSetupOk(m.setup())
        r = m.setup()
        self.assertGreater(r.result["discovery_cache_hits"], 0)
        # A new driver library appears in the host lib dir (DT_SONAME = its own name: no link).
        shutil.copy(fixture(f"libnvidia-glcore.so.{V1}"), m.p(f"/run/host-nvidia/0/libnvidia-fbc.so.{V1}"))
        r = m.setup()
        self.assertSetupOk(r)
        self.assertTrue(os.path.isfile(os.path.join(m.libdir(), f"libnvidia-fbc.so.{V1}")))
        self.assertFalse(os.path.lexists(os.path.join(m.libdir(), "libssl.so.3")))
        # Rewritten in place (same inode) with a library whose DT_SONAME is libssl.so.3: the SONAME
        # link must follow the new content, not a remembered ELF header.
        with open(m.p(f"/run/host-nvidia/0/libnvidia-fbc.so.{V1}"), "r+b") as dst, \
                open(fixture("libssl.so.3"), "rb") as src:
            dst.truncate(0)
            dst.write(src.read())
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(os.readlink(os.path.join(m.libdir(), "libssl.so.3")), f"libnvidia-fbc.so.{V1}")
        # A damaged cache is ignored.
        write(m.p("/run/unbounded-nvidia/discovery-cache.json"), "{not json")
        shutil.rmtree(m.driver_root())
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["discovery_cache_hits"], 0)
        self.assertTrue(os.path.isfile(os.path.join(m.libdir(), f"libnvidia-fbc.so.{V1}")))

    def test_source_rewritten_in_place_with_its_old_mtime_is_copied_again(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        src = m.p(f"/run/host-nvidia/0/libnvidia-cfg.so.{V1}")
        st = os.stat(src)
        with open(src, "r+b") as f:  # same size, different bytes, mtime put back
            f.seek(st.st_size - 8)
            f.write(b"REWRITE!")
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["files_copied"], 1)
        with open(src, "rb") as a, open(os.path.join(m.libdir(), f"libnvidia-cfg.so.{V1}"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_identical_input_gives_byte_identical_output(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        first = snapshot(m.driver_root())
        shutil.rmtree(m.driver_root())
        self.assertSetupOk(m.setup())
        self.assertEqual(snapshot(m.driver_root()), first)

    def test_new_driver_version_replaces_every_file(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        m.clear_staging()
        m.stage_all(V2)
        m.set_proc_version(V2)
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["driver_version"], V2)
        self.assertCompleteRoot(m, V2)
        for dirpath, _, filenames in os.walk(m.driver_root()):
            for n in filenames:
                self.assertNotIn(V1, n)
                if n.endswith(".json"):
                    continue
                with open(os.path.join(dirpath, n), "rb") as f:
                    self.assertNotIn(V1.encode(), f.read(), f"{n} still holds version {V1} content")
        leftovers = [n for n in os.listdir(m.p("/run/nvidia")) if n != "driver"]
        self.assertEqual(leftovers, [])

    def test_replaces_the_old_symlink_layout(self):
        """The broken state of the bug report: a driver root of absolute symlinks into staging."""
        m = self.machine()
        os.makedirs(m.libdir())
        os.symlink(f"/run/host-nvidia/0/libcuda.so.{V1}", os.path.join(m.libdir(), f"libcuda.so.{V1}"))
        r = m.setup()
        self.assertSetupOk(r)
        self.assertCompleteRoot(m, V1)

    def test_driver_root_that_is_a_symlink_becomes_a_directory(self):
        m = self.machine()
        os.makedirs(m.p("/run/nvidia/elsewhere"))
        os.symlink("elsewhere", m.driver_root())
        self.assertSetupOk(m.setup())
        self.assertTrue(stat.S_ISDIR(os.lstat(m.driver_root()).st_mode))
        self.assertEqual(os.listdir(m.p("/run/nvidia/elsewhere")), [])
        self.assertCompleteRoot(m, V1)

    def test_leftover_temp_trees_are_removed(self):
        m = self.machine()
        os.makedirs(m.p("/run/nvidia/.driver-Ab12Cd/lib"))
        write(m.p("/run/nvidia/.driver-Ab12Cd/lib/junk"), "x")
        r = m.setup()
        self.assertSetupOk(r)
        self.assertEqual(r.result["stale_trees_removed"], 1)
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])

    def test_status_json_records_the_result(self):
        m = self.machine()
        r = m.setup()
        self.assertSetupOk(r)
        with open(m.p("/run/unbounded-nvidia/status.json")) as f:
            status = json.load(f)
        self.assertEqual(status["outcome"], "ready")
        self.assertEqual(status["driver_version"], V1)
        for k in ("lock", "wait", "discover", "install", "verify", "total"):
            self.assertIn(k, status["timings_ms"])
        # Issue 18: the copies ran on a pool sized from the CPUs this process may use (at most 8).
        self.assertEqual(status["copy_threads"], min(len(os.sched_getaffinity(0)), status["files_copied"], 8))

    def test_non_gpu_machine_does_nothing(self):
        m = MachineRoot(self)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["outcome"], "no-gpu")
        self.assertFalse(os.path.exists(m.p("/run/nvidia")))

    def test_usage_errors(self):
        m = MachineRoot(self)
        for args in (["bogus"], ["--frobnicate"], ["setup", "verify"], ["--root"]):
            r = subprocess.run([SETUP, *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        r = m.run("--config", m.p("/nonexistent.yaml"), "setup")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent.yaml", r.stderr)

    def test_env_root_is_honoured(self):
        m = self.machine()
        r = subprocess.run([SETUP, "--json"], capture_output=True, text=True,
                           env={**os.environ, "UNBOUNDED_NVIDIA_ROOT": m.path})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertCompleteRoot(m, V1)


class TestBadInput(SetupTestCase):
    """Each bad input: exit 1 or 2, one clear message naming the cause, the previous root untouched."""

    def prepared(self):
        m = self.machine()
        self.assertSetupOk(m.setup())
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            self.spec_before = f.read()
        return m, snapshot(m.driver_root())

    def assertFailsCleanly(self, m, before, rc, *needles):
        r = m.setup()
        self.assertEqual(r.returncode, rc, f"stderr:\n{r.stderr}")
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one message, got:\n{r.stderr}")
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertEqual(snapshot(m.driver_root()), before, "the previous driver root changed")
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            self.assertEqual(f.read(), self.spec_before, "the previous CDI spec changed")
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"], "temp tree left behind")
        return lines[0]

    def test_ten_thousand_staged_versions_give_one_short_line(self):
        """Issue 26, item 12: with no readable module to choose, every staged version was listed in the
        error (409 KB for 10,000); a few are named, with the count."""
        m, before = self.prepared()
        os.unlink(m.p("/proc/driver/nvidia/version"))
        lib = m.p("/run/host-nvidia/0")
        for i in range(10000):
            open(os.path.join(lib, f"libcuda.so.{600 + i // 100}.{i % 100}.01"), "w").close()
        line = self.assertFailsCleanly(m, before, 1, "Found 10001 driver versions in the staging mounts", "and 9998 more")
        self.assertLess(len(line), 600)

    def test_malformed_config(self):
        m, before = self.prepared()
        m.config("staging: /run/host-nvidia\ndriver_root: [unclosed\n")
        self.assertFailsCleanly(m, before, 2, "/etc/unbounded/nvidia.yaml:")

    def test_unknown_config_key(self):
        m, before = self.prepared()
        m.config("staging: /run/host-nvidia\nstagin_timeout: 5s\n")
        line = self.assertFailsCleanly(m, before, 2, "nvidia.yaml:2:", "unknown key 'stagin_timeout'")

    def test_bad_config_value(self):
        m, before = self.prepared()
        m.config("staging_timeout: soon\n")
        self.assertFailsCleanly(m, before, 2, "nvidia.yaml:1:", "staging_timeout")

    def test_missing_libcuda(self):
        m, before = self.prepared()
        os.unlink(m.p(f"/run/host-nvidia/0/libcuda.so.{V1}"))
        self.assertFailsCleanly(m, before, 1, "No libcuda.so.<version>", "/run/host-nvidia/0")

    def test_libcuda_libnvidia_ml_version_mismatch(self):
        m, before = self.prepared()
        os.rename(m.p(f"/run/host-nvidia/0/libnvidia-ml.so.{V1}"), m.p(f"/run/host-nvidia/0/libnvidia-ml.so.{V2}"))
        self.assertFailsCleanly(m, before, 1, "mismatch", f"libcuda.so.{V1}", f"libnvidia-ml.so.{V2}")

    def test_kernel_module_version_mismatch(self):
        m, before = self.prepared()
        m.set_proc_version(V2)
        self.assertFailsCleanly(m, before, 1, "kernel module", V2, V1, "/proc/driver/nvidia/version")

    def test_dangling_link(self):
        m, before = self.prepared()
        lib = m.p(f"/run/host-nvidia/0/libnvidia-ml.so.{V1}")
        os.unlink(lib)
        os.symlink(f"nvidia/current/libnvidia-ml.so.{V1}", lib)
        self.assertFailsCleanly(m, before, 1, f"/run/host-nvidia/0/libnvidia-ml.so.{V1}", "dangling")

    def test_link_loop(self):
        m, before = self.prepared()
        lib = m.p(f"/run/host-nvidia/0/libcuda.so.{V1}")
        os.unlink(lib)
        os.symlink("loop-a", lib)
        os.symlink("loop-b", m.p("/run/host-nvidia/0/loop-a"))
        os.symlink(f"/usr/lib/{ARCH}/loop-a", m.p("/run/host-nvidia/0/loop-b"))
        self.assertFailsCleanly(m, before, 1, f"libcuda.so.{V1}", "a symlink loop")

    def test_link_pointing_outside_staging(self):
        m, before = self.prepared()
        lib = m.p(f"/run/host-nvidia/0/libcuda.so.{V1}")
        os.unlink(lib)
        os.symlink("/etc/shadow-nvidia-nonexistent/x", lib)
        self.assertFailsCleanly(m, before, 1, f"libcuda.so.{V1}", "outside the staging mounts")

    def test_relative_escape_is_clamped_to_the_staging_root(self):
        m, before = self.prepared()
        lib = m.p(f"/run/host-nvidia/0/libcuda.so.{V1}")
        os.unlink(lib)
        # ../../../.. would leave the tree; the resolver clamps at the tree root like RESOLVE_IN_ROOT,
        # so this finds nothing instead of a file of the machine.
        os.symlink("../../../../../etc/hostname", lib)
        self.assertFailsCleanly(m, before, 1, f"libcuda.so.{V1}")

    def test_truncated_library(self):
        m, before = self.prepared()
        with open(m.p(f"/run/host-nvidia/0/libcuda.so.{V1}"), "r+b") as f:
            f.truncate(100)
        self.assertFailsCleanly(m, before, 1, f"libcuda.so.{V1}", "truncated")

    def test_no_staging_within_timeout(self):
        m, before = self.prepared()
        m.clear_staging()
        os.makedirs(m.p("/run/host-nvidia/0"))  # an empty directory left in the image
        m.config("staging_timeout: 300ms\n")
        t = time.monotonic()
        self.assertFailsCleanly(m, before, 1, "Timed out after 300ms", "/run/host-nvidia")
        self.assertLess(time.monotonic() - t, 20)

    def test_missing_control_node_within_timeout(self):
        m, before = self.prepared()
        os.unlink(m.p("/dev/nvidiactl"))
        write(m.p("/dev/nvidiactl"), "")
        m.config("staging_timeout: 200ms\n")
        self.assertFailsCleanly(m, before, 1, "/dev/nvidiactl (not a character device)")

    @unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private tmpfs")
    def test_enospc_on_the_driver_root_filesystem(self):
        m = self.machine()
        # Staging B: the same driver with a 6 MiB libcuda that cannot fit a 4 MiB tmpfs.
        b = MachineRoot(self)
        b.stage_all(V1)
        pad(b.p(f"/run/host-nvidia/0/libcuda.so.{V1}"), 6)
        shutil.move(b.p("/run/host-nvidia"), m.p("/run/host-nvidia-b"))
        write(m.p("/etc/unbounded/b.yaml"), "staging: /run/host-nvidia-b\n")
        os.makedirs(m.p("/run/nvidia"))
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        listing = (f'(cd "{m.p("/run/nvidia")}" && find . -printf "%p %y %s %m %l\\n" | sort && '
                   f'find . -type f -exec sha256sum {{}} + | sort)')
        script = f"""
            set -u
            mount -t tmpfs -o size=4m tmpfs "{m.p('/run/nvidia')}" || exit 90
            "{SETUP}" --root "{m.path}" --json setup 2>"{out}/first" >"{out}/first.json" || exit 91
            {listing} > "{out}/before"
            "{SETUP}" --root "{m.path}" --config "{m.p('/etc/unbounded/b.yaml')}" --json setup \
                >"{out}/json" 2>"{out}/err"
            echo $? > "{out}/rc"
            {listing} > "{out}/after"
        """
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr + open(f"{out}/first").read() if os.path.exists(f"{out}/first") else p.stderr)
        rc = int(open(f"{out}/rc").read())
        err = open(f"{out}/err").read().strip().splitlines()
        self.assertEqual(rc, 1)
        self.assertEqual(len(err), 1, err)
        self.assertIn("No space left on device", err[0])
        # Issue 18: on tmpfs the root's size is memory the pods no longer have, and setup says so.
        first = json.load(open(f"{out}/first.json"))
        self.assertEqual(first["driver_root_fs"], "tmpfs")
        self.assertEqual(first["driver_root_ram_bytes"], first["bytes_copied"] + first["bytes_reused"])
        self.assertGreater(first["driver_root_ram_bytes"], 0)
        self.assertIn("/run/nvidia/driver", err[0])
        self.assertEqual(open(f"{out}/before").read(), open(f"{out}/after").read(),
                         "the old root changed or a temp tree was left behind after ENOSPC")


class TestConcurrency(SetupTestCase):
    def test_second_run_waits_for_the_lock(self):
        m = self.machine()
        lock_path = m.p("/run/unbounded-nvidia/lock")
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
        p = subprocess.Popen([SETUP, "--root", m.path, "--json", "setup"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 20
            while not any("waiting" in l for l in lines) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertIn("unbounded-nvidia-setup: Another unbounded-nvidia-setup run is in progress, waiting for it to finish.\n",
                          lines)
            time.sleep(0.3)
            self.assertIsNone(p.poll(), "setup did not wait for the lock")
            self.assertFalse(os.path.exists(m.driver_root()), "setup touched the root while locked out")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        out = p.stdout.read()
        p.wait(timeout=60)
        reader.join(timeout=10)
        self.assertEqual(p.returncode, 0, "".join(lines))
        self.assertTrue(json.loads(out)["ready"])

    def test_concurrent_runs_leave_one_whole_root(self):
        m = self.machine()
        procs = [subprocess.Popen([SETUP, "--root", m.path, "setup"], stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
        self.assertCompleteRoot(m, V1)
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])


class TestKill(SetupTestCase):
    TRIALS = 60

    def test_kill_9_at_random_moments(self):
        """Switch between two staged versions and SIGKILL setup at random points of its run: the root
        is always absent, the whole old version or the whole new one; the next run succeeds and leaves
        no temp tree."""
        m = MachineRoot(self)
        for name, version in (("a", V1), ("b", V2)):
            t = MachineRoot(self)
            t.stage_all(version)
            for lib in ("libcuda", "libnvidia-ml", "libnvidia-glcore", "libnvidia-eglcore"):
                pad(t.p(f"/run/host-nvidia/0/{lib}.so.{version}"), 3)
            shutil.move(t.p("/run/host-nvidia"), m.p(f"/run/host-nvidia-{name}"))
            write(m.p(f"/etc/unbounded/{name}.yaml"), f"staging: /run/host-nvidia-{name}\n")
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")

        def run(name):
            return subprocess.run([SETUP, "--root", m.path, "--config", m.p(f"/etc/unbounded/{name}.yaml"), "setup"],
                                  capture_output=True, text=True)

        # Reference trees, and how long a full build takes.
        refs, specs, durations = {}, {}, []
        spec_path = m.p("/etc/cdi/nvidia.yaml")
        for name in ("a", "b", "a", "b"):
            t = time.monotonic()
            r = run(name)
            durations.append(time.monotonic() - t)
            self.assertEqual(r.returncode, 0, r.stderr)
            refs[name] = snapshot(m.driver_root())
            specs[name] = open(spec_path).read()
        self.assertNotEqual(specs["a"], specs["b"])
        shutil.rmtree(m.driver_root())
        os.unlink(spec_path)
        full = max(durations)

        rng = random.Random(int(os.environ.get("KILL_SEED", "1234")))
        outcomes = {"absent": 0, "a": 0, "b": 0}
        name = "a"
        for trial in range(self.TRIALS):
            name = "b" if name == "a" else "a"
            p = subprocess.Popen([SETUP, "--root", m.path, "--config", m.p(f"/etc/unbounded/{name}.yaml"), "setup"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, full * 1.2))
            p.send_signal(signal.SIGKILL)
            p.wait()
            snap = snapshot(m.driver_root())
            if snap is None:
                self.assertEqual(outcomes["a"] + outcomes["b"], 0, f"trial {trial}: root vanished after existing")
                outcomes["absent"] += 1
            elif snap == refs["a"]:
                outcomes["a"] += 1
            elif snap == refs["b"]:
                outcomes["b"] += 1
            else:
                self.fail(f"trial {trial}: driver root is neither whole version")
            if os.path.exists(spec_path):
                self.assertIn(open(spec_path).read(), (specs["a"], specs["b"]), f"trial {trial}: partial CDI spec")
        # After the last kill, the next run completes and cleans up.
        r = run("a")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(snapshot(m.driver_root()), refs["a"])
        self.assertEqual(open(spec_path).read(), specs["a"])
        self.assertEqual(os.listdir(m.p("/etc/cdi")), ["nvidia.yaml"], "temporary spec files piled up")
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])
        print(f"# kill outcomes over {self.TRIALS} trials: {outcomes}, full run {full * 1000:.0f}ms")
        self.assertGreater(outcomes["a"] + outcomes["b"], 0)


if __name__ == "__main__":
    main()
