#!/usr/bin/env python3
"""Issue 34, items 5, 6 and 7, and /dev/char links of nodes that went: device nodes taken only with
their driver's numbers, IPC endpoints only where nobody but root could have put them, a daemon that
stops and starts again followed by the refresh (and watched by the refresh path unit), and links of
ours left by nodes that went removed. Each case runs with openat2 and with it forced absent
(no_openat2_shim.so), as the units' sandbox runs the binary."""

import os
import shutil
import socket
import subprocess
import tempfile

from unbounded_tests.cdi_case import CdiCase
from unbounded_tests.harness import GENERATOR, MachineRoot, main, make_chardev, with_and_without_openat2, write

SPEC = "/etc/cdi/nvidia.yaml"
PERSISTENCED = "/run/nvidia-persistenced/socket"
FABRICMANAGER = "/run/nvidia-fabricmanager/socket"
QUICK = "refresh:\n  settle_time: 0s\n"


class Both(CdiCase):
    """Runs each test's body with openat2 and without it."""

    def each(self, body):
        with_and_without_openat2(body)

    def spec(self, m):
        return self.read(m, SPEC)

    def setup_env(self, m, env, rc=0):
        r = m.setup(env=env)
        self.assertEqual(r.returncode, rc, r.stderr)
        return r


def node_paths(spec):
    return {line.split(":", 1)[1].strip() for line in spec.splitlines() if line.strip().startswith("- path: /dev/")}


class TestNodeNumbers(Both):
    """Item 5: /dev/nvidia0 and /dev/nvidiactl made as 1:1 are /dev/mem, offered rwm to every GPU pod."""

    def machine(self, proc_devices=True):
        m = MachineRoot(self).standard(gpus=2)
        for i, bus in enumerate(("0000:18:00.0", "0000:19:00.0")):
            for node, minor in ((f"card{i + 1}", i + 1), (f"renderD{128 + i}", 128 + i)):
                os.makedirs(m.p(f"/sys/bus/pci/devices/{bus}/drm/{node}"), exist_ok=True)
                make_chardev(m.p(f"/dev/dri/{node}"), 226, minor)
        if proc_devices:
            m.write_proc_devices()
        return m

    def test_nodes_of_another_drivers_numbers_are_refused_and_named(self):
        def body(env):
            m = self.machine()
            make_chardev(m.p("/dev/nvidia1"), 1, 1)          # /dev/mem
            make_chardev(m.p("/dev/nvidiactl"), 1, 1)
            make_chardev(m.p("/dev/nvidia-uvm"), 1, 3)       # /dev/null's number
            make_chardev(m.p("/dev/nvidia-modeset"), 195, 0)  # the NVIDIA major, a GPU's minor
            make_chardev(m.p("/dev/dri/card1"), 1, 1)
            make_chardev(m.p("/dev/dri/renderD128"), 226, 5)
            r = self.setup_env(m, env)
            nodes = node_paths(self.spec(m))
            self.assertEqual(nodes, {"/dev/nvidia0", "/dev/nvidia-uvm-tools"}, self.spec(m))
            for path, got, want in (("/dev/nvidia1", "1:1", "195:1"), ("/dev/nvidiactl", "1:1", "195:255"),
                                    ("/dev/nvidia-uvm", "1:3", "509:0"), ("/dev/nvidia-modeset", "195:0", "195:254"),
                                    ("/dev/dri/card1", "1:1", "226:1"), ("/dev/dri/renderD128", "226:5", "226:128")):
                self.assertTrue(any(f"Ignoring {path}: it is {got}, expected {want}" in w for w in r.result["warnings"]),
                                (path, r.result["warnings"]))
            self.assertFalse(os.path.lexists(m.p("/dev/char/1:1")))
            self.assertFalse(os.path.lexists(m.p("/dev/char/1:3")))
            self.assertEqual(os.readlink(m.p("/dev/char/195:0")), "../nvidia0")
            self.assertEqual(m.run("verify", env=env).returncode, 0)
        self.each(body)

    def test_every_gpu_node_of_another_number_leaves_no_gpu(self):
        def body(env):
            m = self.machine()
            make_chardev(m.p("/dev/nvidia0"), 1, 1)
            make_chardev(m.p("/dev/nvidia1"), 195, 7)
            r = m.setup(env=env)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("Ignoring /dev/nvidia0: it is 1:1, expected 195:0", r.stderr)
            self.assertIn("Ignoring /dev/nvidia1: it is 195:7, expected 195:1", r.stderr)
            self.assertFalse(os.path.exists(m.p(SPEC)))
        self.each(body)

    def test_the_majors_come_from_proc_devices(self):
        """A major /proc/devices gives the driver is the one expected (the open modules' 'nvidia' name
        too); nvidia-uvm's is dynamic: without its line its nodes cannot be checked and are left out;
        195 given to another driver is not the NVIDIA driver's."""
        def body(env):
            m = self.machine()
            write(m.p("/proc/devices"), "Character devices:\n  1 mem\n195 nvidia\n226 drm\n510 nvidia-uvm\n\nBlock devices:\n  7 loop\n")
            r = self.setup_env(m, env)
            nodes = node_paths(self.spec(m))
            self.assertIn("/dev/nvidiactl", nodes)
            self.assertNotIn("/dev/nvidia-uvm", nodes)
            self.assertIn("Ignoring /dev/nvidia-uvm: it is 509:0, expected 510:0", r.stderr)
            write(m.p("/proc/devices"), "Character devices:\n  1 mem\n195 nvidia-frontend\n\nBlock devices:\n509 nvidia-uvm\n")
            r = self.setup_env(m, env)
            self.assertFalse({"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} & node_paths(self.spec(m)))
            self.assertIn("Ignoring /dev/nvidia-uvm: /proc/devices has no nvidia-uvm major", r.stderr)
            self.assertIn("/dev/dri/card1", node_paths(self.spec(m)))  # drm not loaded: 226 is still DRM's number
            write(m.p("/proc/devices"), "Character devices:\n195 something-else\n226 drm\n509 nvidia-uvm\n")
            r = m.setup(env=env)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("Ignoring /dev/nvidia0: /proc/devices has no nvidia-frontend major", r.stderr)
        self.each(body)

    def test_without_proc_devices_the_fixed_numbers_are_still_checked(self):
        """A kernel always has /proc/devices; a fake or offline root may not: 195 and 226 are the numbers
        the NVIDIA and DRM drivers always register, so a node of another is still refused; UVM's
        dynamic major cannot be known there and its nodes are taken on their type and minor."""
        def body(env):
            m = self.machine(proc_devices=False)
            make_chardev(m.p("/dev/nvidia1"), 1, 1)
            make_chardev(m.p("/dev/dri/card1"), 1, 2)
            r = self.setup_env(m, env)
            nodes = node_paths(self.spec(m))
            self.assertNotIn("/dev/nvidia1", nodes)
            self.assertNotIn("/dev/dri/card1", nodes)
            self.assertIn("/dev/dri/renderD128", nodes)
            self.assertIn("/dev/nvidia-uvm", nodes)
            self.assertIn("Ignoring /dev/nvidia1: it is 1:1, expected 195:1", r.stderr)
            self.assertIn("Ignoring /dev/dri/card1: it is 1:2, expected 226:1", r.stderr)
        self.each(body)


class TestIpcOwnership(Both):
    """Item 6: the MPS rule for every endpoint: the socket and each directory on its path root's and
    writable by nobody else, no symlinks; otherwise left out with a warning."""

    def machine(self):
        m = MachineRoot(self).standard(gpus=1)
        socks = m.add_ipc()
        self.addCleanup(lambda: [s.close() for s in socks])
        return m

    def assertLeftOut(self, m, env, path, why):
        r = self.setup_env(m, env)
        self.assertTrue(any(w.startswith(f"Not mounting {path} into containers: ") and why in w for w in r.result["warnings"]),
                        (why, r.result["warnings"]))
        self.assertNotIn(f"hostPath: {path}", self.spec(m))
        v = m.run("verify", env=env)
        self.assertEqual(v.returncode, 0, v.stderr)
        return r

    def test_a_socket_directory_a_user_owns_or_may_write_is_not_mounted(self):
        def body(env):
            m = self.machine()
            d = m.p("/run/nvidia-persistenced")
            os.chown(d, 1000, 1000)
            self.assertLeftOut(m, env, PERSISTENCED, "/run/nvidia-persistenced is owned by UID 1000, not by root")
            self.assertIn(f"hostPath: {FABRICMANAGER}", self.spec(m))  # the other daemon's is still there
            os.chown(d, 0, 0)
            for mode in (0o775, 0o757, 0o1777):
                os.chmod(d, mode)
                self.assertLeftOut(m, env, PERSISTENCED, f"group or others may write /run/nvidia-persistenced (mode {mode:04o})")
            os.chmod(d, 0o755)
            os.chmod(m.p("/run"), 0o777)  # a directory above it: anyone could rename it away
            self.assertLeftOut(m, env, PERSISTENCED, "group or others may write /run (mode 0777)")
            os.chmod(m.p("/run"), 0o755)
            os.chown(m.p(FABRICMANAGER), 1000, 0)  # a socket a user made
            self.assertLeftOut(m, env, FABRICMANAGER, "the socket is owned by UID 1000, not by root")
            os.chown(m.p(FABRICMANAGER), 0, 0)
            self.setup_env(m, env)
            for p in (PERSISTENCED, FABRICMANAGER, "/tmp/nvidia-mps"):  # all back once root's again
                self.assertIn(f"hostPath: {p}\n", self.spec(m))
        self.each(body)

    def test_a_socket_directory_that_is_a_symlink_into_a_users_directory_is_not_mounted(self):
        def body(env):
            m = self.machine()
            home = m.p("/home/user/fake")
            os.makedirs(home, exist_ok=True)
            s = socket.socket(socket.AF_UNIX)
            s.bind(os.path.join(home, "socket"))
            self.addCleanup(s.close)
            shutil.rmtree(m.p("/run/nvidia-persistenced"))
            os.symlink("/home/user/fake", m.p("/run/nvidia-persistenced"))
            self.assertLeftOut(m, env, PERSISTENCED, "/run/nvidia-persistenced is a symbolic link")
            os.unlink(m.p("/run/nvidia-fabricmanager/socket"))
            os.symlink("/home/user/fake/socket", m.p("/run/nvidia-fabricmanager/socket"))
            self.assertLeftOut(m, env, FABRICMANAGER, "/run/nvidia-fabricmanager/socket is a symbolic link")
        self.each(body)

    def test_mps_under_a_sticky_tmp_is_still_mounted(self):
        """/tmp is 1777 on every machine: the sticky bit lets nobody but root rename root's
        /tmp/nvidia-mps, so the directory above it may be everyone's; the MPS directory itself may not."""
        def body(env):
            m = self.machine()
            os.chmod(m.p("/tmp"), 0o1777)
            self.setup_env(m, env)
            self.assertIn("hostPath: /tmp/nvidia-mps\n", self.spec(m))
            os.chmod(m.p("/tmp"), 0o777)
            self.assertLeftOut(m, env, "/tmp/nvidia-mps", "group or others may write /tmp (mode 0777)")
            os.chmod(m.p("/tmp"), 0o755)
        self.each(body)


class TestDaemonRestart(Both):
    """Item 7: nvidia-persistenced or the fabric manager stops and starts again while pods are created:
    a refresh (started by the path unit watching their directories) drops the mount of a socket that
    went and adds it back when the daemon is back, and the spec never names a socket that is not there."""

    def test_a_daemon_stopping_and_starting_again_is_followed_by_the_refresh(self):
        def body(env):
            m = MachineRoot(self).standard(gpus=1)
            m.config(QUICK)
            socks = m.add_ipc()
            self.addCleanup(lambda: [s.close() for s in socks])
            self.setup_env(m, env)
            self.assertIn(f"hostPath: {PERSISTENCED}", self.spec(m))
            for round_ in range(3):
                # The daemon stops: it removes its socket; a pod created now would fail to mount it.
                socks[0].close()
                os.unlink(m.p(PERSISTENCED))
                v = m.run("verify", env=env)
                self.assertEqual(v.returncode, 1)
                self.assertIn(f"hostPath {PERSISTENCED} does not exist", v.stderr)
                r = m.run("--json", "refresh", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                spec = self.spec(m)
                self.assertNotIn(f"hostPath: {PERSISTENCED}", spec)
                self.assertIn(f"hostPath: {FABRICMANAGER}", spec)
                self.assertEqual(m.run("verify", env=env).returncode, 0)
                # It starts again: the next pod gets its socket.
                socks[0] = socket.socket(socket.AF_UNIX)
                socks[0].bind(m.p(PERSISTENCED))
                r = m.run("--json", "refresh", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"hostPath: {PERSISTENCED}", self.spec(m), round_)
                self.assertEqual(m.run("verify", env=env).returncode, 0)
        self.each(body)

    def test_the_refresh_path_unit_watches_the_socket_directories(self):
        """systemd watches a directory that does not exist yet from its parent and fires when it appears,
        so the watch is there whether or not the daemon ran at boot."""
        for ipc in (True, False):
            root = tempfile.mkdtemp(prefix="unbounded-gen-")
            self.addCleanup(shutil.rmtree, root, True)
            make_chardev(os.path.join(root, "dev/nvidiactl"), 195, 255)
            os.makedirs(os.path.join(root, "run/host-nvidia/0"))
            if not ipc:
                write(os.path.join(root, "etc/unbounded/nvidia.yaml"), "ipc_sockets: false\n")
            out = os.path.join(root, "out")
            e = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
            e["UNBOUNDED_NVIDIA_ROOT"] = root
            e["SYSTEMD_VIRTUALIZATION"] = "container:systemd-nspawn"  # as PID 1 of an nspawn machine says
            r = subprocess.run([GENERATOR, out, out, out], capture_output=True, text=True, env=e)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "unbounded-nvidia-refresh.path")) as f:
                unit = f.read()
            for d in ("/run/nvidia-persistenced", "/run/nvidia-fabricmanager"):
                self.assertEqual(f"PathChanged={d}\n" in unit, ipc, unit)


class TestStaleDevCharLinks(Both):
    """/dev/char links of nodes that went: a link of ours (../<one of our node names>) whose node is gone
    is removed; every other entry is left alone."""

    def test_links_of_nodes_that_went_are_removed_and_nothing_else(self):
        def body(env):
            m = MachineRoot(self).standard(gpus=2)
            self.setup_env(m, env)
            self.assertEqual(os.readlink(m.p("/dev/char/195:1")), "../nvidia1")
            # The host takes GPU 1 away; a MIG instance went; other entries are someone else's.
            os.unlink(m.p("/dev/nvidia1"))
            os.makedirs(m.p("/dev/nvidia-caps"), exist_ok=True)
            os.symlink("../nvidia-caps/nvidia-cap12", m.p("/dev/char/508:12"))
            os.symlink("../dri/card9", m.p("/dev/char/226:9"))
            os.symlink("../sda", m.p("/dev/char/8:0"))                # not ours in form
            os.symlink("../nvidia7", m.p("/dev/char/195:7-extra"))    # not a number name
            os.symlink("/dev/nvidia3", m.p("/dev/char/195:3"))         # absolute: not ours in form
            write(m.p("/dev/char/195:4"), "a file\n")
            make_chardev(m.p("/dev/nvidia5"), 195, 5)                 # a node of ours that is still there,
            os.symlink("../nvidia5", m.p("/dev/char/195:5"))           # though not in the spec
            r = self.setup_env(m, env)
            self.assertEqual(r.result["dev_char_links_removed"], 3, r.stderr)
            for gone in ("195:1", "508:12", "226:9"):
                self.assertFalse(os.path.lexists(m.p(f"/dev/char/{gone}")), gone)
            self.assertEqual(os.readlink(m.p("/dev/char/8:0")), "../sda")
            self.assertEqual(os.readlink(m.p("/dev/char/195:7-extra")), "../nvidia7")
            self.assertEqual(os.readlink(m.p("/dev/char/195:3")), "/dev/nvidia3")
            self.assertEqual(open(m.p("/dev/char/195:4")).read(), "a file\n")
            self.assertEqual(os.readlink(m.p("/dev/char/195:5")), "../nvidia5")
            self.assertEqual(os.readlink(m.p("/dev/char/195:0")), "../nvidia0")
            again = self.setup_env(m, env)
            self.assertEqual(again.result["dev_char_links_removed"], 0)
        self.each(body)

    def test_a_link_of_ours_leading_to_a_node_renumbered_is_removed(self):
        """195:3 -> ../nvidia3, and /dev/nvidia3 is now 195:4: DeviceAllow=/dev/char/195:3 would allow
        another GPU than the one the rule names."""
        def body(env):
            m = MachineRoot(self).standard(gpus=1)
            make_chardev(m.p("/dev/nvidia3"), 195, 4)
            os.makedirs(m.p("/dev/char"), exist_ok=True)
            os.symlink("../nvidia3", m.p("/dev/char/195:3"))
            r = self.setup_env(m, env)
            self.assertEqual(r.result["dev_char_links_removed"], 1)
            self.assertFalse(os.path.lexists(m.p("/dev/char/195:3")))
        self.each(body)


if __name__ == "__main__":
    main()
