#!/usr/bin/env python3
"""Issue 27, item 1: the spec as users consume it. Debian's podman (4.3, the container-device-interface
library containerd and CRI-O use too) runs containers from our spec, and each case asserts what the
container itself sees. The driver root is one setup built from Debian's real NVIDIA 535 packages (the
real-host tests' download, debian_hosts.py); the image is a minbase debootstrap of bookworm, cached in
/var/tmp like the system tier's image.

Nothing on the test machine changes: every podman runs in a private mount namespace whose /run is a
tmpfs (podman's run root, /run/nvidia bound from the machine root, /var/run/cdi), whose /etc is an
overlay with the machine root's /etc/cdi bound into it, and whose /dev is a tmpfs with the machine
root's fake /dev/nvidia* nodes (no driver: opening one gives ENXIO) beside the usual few. podman keeps
its storage in a temporary directory and runs runc with the cgroupfs manager (this machine has cgroup v1
and no systemd as PID 1)."""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests import debian_hosts as dh
from unbounded_tests.harness import ARCH, MachineRoot, main, make_chardev

HERE = os.path.dirname(os.path.abspath(__file__))

CACHE = os.environ.get("UNBOUNDED_CONSUMER_CACHE", "/var/tmp/unbounded-nvidia-consumer")
LIB = "/usr/lib/x86_64-linux-gnu"
UUIDS = [f"GPU-{i:08x}-8e4b-4d0e-9c1a-2b7e6d5f4a10" for i in range(4)]
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def image():
    """The container image: `debootstrap --variant=minbase bookworm`, built once (about a minute)."""
    os.makedirs(CACHE, exist_ok=True)
    root = os.path.join(CACHE, "bookworm-minbase")
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(root, ".complete")):
            return root
        shutil.rmtree(root, ignore_errors=True)
        log = os.path.join(CACHE, "debootstrap.log")
        with open(log, "w") as f:
            r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, "http://deb.debian.org/debian"],
                               stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise RuntimeError(f"debootstrap of the container image failed ({r.returncode}), log {log}:\n{open(log).read()[-2000:]}")
        open(os.path.join(root, ".complete"), "w").close()
        return root


def tool(name):
    path = shutil.which(name)
    if not path:  # loud, never a skip: make check installs them
        raise RuntimeError(f"{name} is missing: make check installs it (CONSUMER_DEPS)")
    return path


class PodmanCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tool("podman")
        tool("runc")
        cls.image = image()
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-podman-")
        cls.host = dh.HostTree(os.path.join(cls.tmp, "host"))
        dh.install_debian(cls.host, "bookworm-535")
        cls.version = [n for n in os.listdir(cls.host.p(f"{LIB}/nvidia/current"))
                       if n.startswith("libcuda.so.") and n.count(".") == 4][0][len("libcuda.so."):]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # The host recipe's binds, the graphics configuration directories included.
    BINDS = [LIB, "/usr/lib/nvidia/current", "/usr/share/glvnd/egl_vendor.d", "/usr/share/vulkan", "/etc/OpenCL/vendors"]

    def machine(self, gpus=(0, 1), listed=2):
        """A machine root from the real files with `listed` GPUs in /proc and nodes for `gpus`; setup run."""
        m = MachineRoot(self)
        for n, path in enumerate(self.BINDS):
            dh.bind(m, self.host, path, n)
        m.set_proc_version(self.version)
        m.add_control_nodes()
        for i in range(listed):
            m.add_gpu(i, f"0000:{0x18 + i:02x}:00.0", UUIDS[i])
        for i in range(listed):
            if i not in gpus:
                os.unlink(m.p(f"/dev/nvidia{i}"))
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        return m

    def podman(self, m, device, script, expect_rc=0):
        """Runs `sh -c script` in a container of the minbase image given `--device device`."""
        work = tempfile.mkdtemp(prefix="podman-", dir=self.tmp)
        nodes = [n for n in os.listdir(m.p("/dev")) if n.startswith("nvidia")]
        ns = ["set -e",
              "mount -t tmpfs tmpfs /run",
              "mkdir -p /run/nvidia /run/cdi /run/podman",
              f"mount --bind {m.p('/run/nvidia')} /run/nvidia",
              f"mkdir -p {work}/etc-upper {work}/etc-work",
              f"mount -t overlay overlay -o lowerdir=/etc,upperdir={work}/etc-upper,workdir={work}/etc-work /etc",
              "mkdir -p /etc/cdi",
              f"mount --bind {m.p('/etc/cdi')} /etc/cdi",
              # /dev: a tmpfs with the usual few and the machine root's nodes
              f"mkdir -p {work}/dev",
              f"mount --rbind /dev {work}/dev",
              "mount -t tmpfs -o mode=755 tmpfs /dev"]
        for n in DEV_NODES:
            ns += [f"touch /dev/{n}", f"mount --bind {work}/dev/{n} /dev/{n}"]
        ns += ["mkdir -p /dev/pts /dev/shm", "mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts",
               "ln -s pts/ptmx /dev/ptmx", "mount -t tmpfs tmpfs /dev/shm"]
        for n in nodes:
            path = m.p(f"/dev/{n}")
            if os.path.isdir(path):
                ns += [f"mkdir -p /dev/{n}", f"mount --bind {path} /dev/{n}"]
            else:
                st = os.stat(path)
                ns += [f"mknod -m {st.st_mode & 0o777:o} /dev/{n} c {os.major(st.st_rdev)} {os.minor(st.st_rdev)}"]
        ns.append(" ".join([
            "podman", "--root", f"{work}/storage", "--runroot", "/run/podman", "--runtime", "runc",
            "--cgroup-manager", "cgroupfs", "--events-backend", "none", "--log-level", "error",
            "run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
            "--device", device, "--rootfs", f"{self.image}:O", "/bin/sh", "-c", shell_quote(script)]))
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(ns)],
                           capture_output=True, text=True, timeout=120)
        detail = f"podman exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        if expect_rc is None:
            self.assertNotEqual(r.returncode, 0, detail)
        else:
            self.assertEqual(r.returncode, expect_rc, detail)
        return r


def shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


class TestDevices(PodmanCase):
    def nodes(self, r):
        return sorted(line.split()[-1] for line in r.stdout.splitlines() if line.startswith("NODE "))

    LIST = "for n in /dev/nvidia*; do echo NODE $n; done"

    def test_all(self):
        m = self.machine()
        r = self.podman(m, "nvidia.com/gpu=all", self.LIST)
        self.assertEqual(self.nodes(r), ["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0",
                                         "/dev/nvidia1", "/dev/nvidiactl"])

    def test_by_index(self):
        m = self.machine()
        r = self.podman(m, "nvidia.com/gpu=0", self.LIST)
        self.assertIn("/dev/nvidia0", self.nodes(r))
        self.assertNotIn("/dev/nvidia1", self.nodes(r))

    def test_by_uuid(self):
        m = self.machine()
        r = self.podman(m, f"nvidia.com/gpu={UUIDS[1]}", self.LIST)
        self.assertIn("/dev/nvidia1", self.nodes(r))
        self.assertNotIn("/dev/nvidia0", self.nodes(r))

    def test_a_machine_given_gpus_2_and_3(self):
        """Its "0" is the host's GPU 2: the container gets /dev/nvidia2 and no other GPU."""
        m = self.machine(gpus=(2, 3), listed=4)
        r = self.podman(m, "nvidia.com/gpu=0", self.LIST)
        gpus = [n for n in self.nodes(r) if n[len("/dev/nvidia"):].isdigit()]
        self.assertEqual(gpus, ["/dev/nvidia2"])

    def test_the_node_is_the_driver_s_and_allowed(self):
        """No driver here: a node the device cgroup allows opens with ENXIO, a denied one with EPERM."""
        m = self.machine()
        r = self.podman(m, "nvidia.com/gpu=0", "cat /dev/nvidia0 2>&1 || true; ls -l /dev/nvidia0")
        self.assertIn("No such device or address", r.stdout)
        self.assertIn(" 195, ", r.stdout)


class TestLibraries(PodmanCase):
    def test_the_loader_finds_the_mounted_libraries(self):
        m = self.machine()
        v = self.version
        script = (f"/lib64/ld-linux-x86-64.so.2 --preload 'libcuda.so.1 libnvidia-ml.so.1' --list /bin/true; "
                  f"sha256sum /lib/{ARCH}/libcuda.so.{v} /lib/{ARCH}/libnvidia-ml.so.{v}")
        r = self.podman(m, "nvidia.com/gpu=all", script)
        self.assertRegex(r.stdout, rf"libcuda\.so\.1 => /lib/{ARCH}/libcuda\.so\.1 ")
        self.assertRegex(r.stdout, rf"libnvidia-ml\.so\.1 => /lib/{ARCH}/libnvidia-ml\.so\.1 ")
        for lib in ("libcuda", "libnvidia-ml"):
            digest = subprocess.run(["sha256sum", os.path.join(m.libdir(), f"{lib}.so.{v}")], capture_output=True,
                                    text=True, check=True).stdout.split()[0]
            self.assertIn(f"{digest}  /lib/{ARCH}/{lib}.so.{v}", r.stdout, "the container's file is not the root's copy")

    def test_nvidia_smi_gets_as_far_as_the_driver(self):
        m = self.machine()
        r = self.podman(m, "nvidia.com/gpu=all", "nvidia-smi 2>&1; echo rc=$?")
        self.assertIn("couldn't communicate with the NVIDIA driver", r.stdout)
        self.assertNotIn("couldn't find libnvidia-ml.so", r.stdout)


    def test_egl_vulkan_and_opencl_find_nvidia_where_their_loaders_look(self):
        """glvnd reads /usr/share/glvnd/egl_vendor.d, the Vulkan loader /usr/share/vulkan/icd.d and
        implicit_layer.d, the OpenCL ICD loader /etc/OpenCL/vendors: NVIDIA's files are there, and the
        library each names is one the container's loader resolves."""
        m = self.machine()
        script = ("cat /usr/share/glvnd/egl_vendor.d/10_nvidia.json /usr/share/vulkan/icd.d/nvidia_icd.json "
                  "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json /etc/OpenCL/vendors/nvidia.icd; "
                  "/lib64/ld-linux-x86-64.so.2 --preload 'libEGL_nvidia.so.0 libnvidia-opencl.so.1' --list /bin/true; "
                  f"test -f /lib/{ARCH}/libGLX_nvidia.so.0 && echo GLX-THERE")
        r = self.podman(m, "nvidia.com/gpu=all", script)
        self.assertIn('"library_path" : "libEGL_nvidia.so.0"', r.stdout)
        self.assertEqual(r.stdout.count('"library_path": "libGLX_nvidia.so.0"'), 2, r.stdout)  # ICD and layer
        self.assertIn("libnvidia-opencl.so.1\n", r.stdout)
        self.assertRegex(r.stdout, rf"libEGL_nvidia\.so\.0 => /lib/{ARCH}/libEGL_nvidia\.so\.0 ")
        self.assertRegex(r.stdout, rf"libnvidia-glsi\.so\.{self.version} => /lib/{ARCH}/libnvidia-glsi\.so\.{self.version} ")
        self.assertRegex(r.stdout, rf"libnvidia-opencl\.so\.1 => /lib/{ARCH}/libnvidia-opencl\.so\.1 ")
        self.assertIn("GLX-THERE", r.stdout)

class TestBrokenSpec(PodmanCase):

    def test_a_missing_host_path_fails_the_container(self):
        """So the tier can fail: a spec naming a file the root does not have is refused by the runtime."""
        m = self.machine()
        os.unlink(os.path.join(m.libdir(), f"libnvidia-ml.so.{self.version}"))
        r = self.podman(m, "nvidia.com/gpu=all", "true", expect_rc=None)
        self.assertIn(f"libnvidia-ml.so.{self.version}", r.stderr + r.stdout)


if __name__ == "__main__":
    main()
