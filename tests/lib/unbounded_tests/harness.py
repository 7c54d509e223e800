"""Shared pieces of the integration tests: fake machine roots assembled from the compiled fixtures,
running the real binaries under --root, and a TAP runner so meson counts every test case."""

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

FIXTURES = os.environ.get("FIXTURE_DIR", "")
SCHEMA_DIR = os.environ.get("CDI_SCHEMA_DIR", "")


def wrap_binaries(wrapper, names):
    """A cross build (`make check-arm64`): the binaries run under the exe wrapper (qemu-user), with no
    binfmt_misc registration. Each $NAME_BIN becomes a small script that execs the wrapper on it, so
    every way a test starts one (argv lists, Popen and kill, shell scripts) goes through it."""
    d = tempfile.mkdtemp(prefix="unbounded-wrapped-")
    for name in names:
        real = os.environ.get(name, "")
        if not real:
            continue
        path = os.path.join(d, os.path.basename(real))
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexec " + " ".join(map(shlex.quote, wrapper + [real])) + ' "$@"\n')
        os.chmod(path, 0o755)
        os.environ[name] = path


EXE_WRAPPER = shlex.split(os.environ.get("TEST_EXE_WRAPPER", ""))
EMULATED = bool(EXE_WRAPPER)
if EXE_WRAPPER and not os.environ.get("UNBOUNDED_WRAPPED"):
    wrap_binaries(EXE_WRAPPER, ["SETUP_BIN", "GENERATOR_BIN", "LICENSE_BIN", "HOST_BIN", "CONSUMERS_BIN"])
    os.environ["UNBOUNDED_WRAPPED"] = "1"
SETUP = os.environ.get("SETUP_BIN", "")
GENERATOR = os.environ.get("GENERATOR_BIN", "")

V1 = "535.104.05"
V2 = "550.54.15"

DRIVER_LIBS = {
    # name -> SONAME link the setup must create ("" when DT_SONAME is the file's own name)
    "libcuda": "libcuda.so.1",
    "libnvidia-ml": "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler": "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-allocator": "libnvidia-allocator.so.1",
    "libnvidia-cfg": "libnvidia-cfg.so.1",
    "libnvidia-opticalflow": "libnvidia-opticalflow.so.1",
    "libnvidia-encode": "libnvidia-encode.so.1",
    "libnvcuvid": "libnvcuvid.so.1",
    "libEGL_nvidia": "libEGL_nvidia.so.0",
    "libGLX_nvidia": "libGLX_nvidia.so.0",
    "libnvidia-eglcore": "",
    "libnvidia-glcore": "",
}
VDPAU_LIBS = {"libvdpau_nvidia": "libvdpau_nvidia.so.1"}
COMPANIONS = {"libnvidia-egl-wayland.so.1.1.9": "libnvidia-egl-wayland.so.1",
              "libnvidia-egl-gbm.so.1.1.0": "libnvidia-egl-gbm.so.1"}
UNRELATED = ["libz.so.1.2.13", "libssl.so.3", "libGL.so.1.7.0"]
HELPERS = ["nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
           "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"]
# The machine the binaries and fixtures are built for: a cross build says so (TEST_MULTIARCH).
ARCH = os.environ.get("TEST_MULTIARCH") or {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}[os.uname().machine]

IS_ROOT = os.geteuid() == 0
# make check-sanitizers (tests/build-variant.sh): the binaries carry AddressSanitizer and UBSan. Their
# peak RSS is the sanitizer's (shadow memory, quarantine), and an LD_PRELOAD shim must come after
# the ASan runtime, which insists on being first.
SANITIZED = os.environ.get("UNBOUNDED_SANITIZED") == "1"


def preload(*shims):
    """An LD_PRELOAD value for shims, the ASan runtime first when the binaries carry it."""
    if SANITIZED:
        out = subprocess.run(["ldd", SETUP], capture_output=True, text=True, check=True).stdout
        runtime = [line.split("=>")[1].split()[0] for line in out.splitlines() if "libasan.so" in line]
        if not runtime:
            raise RuntimeError(f"UNBOUNDED_SANITIZED=1 but {SETUP} does not link libasan")
        shims = (runtime[0],) + shims
    return ":".join(shims)


def preload_env(*shims):
    """The environment that preloads shims into the binaries. Under the exe wrapper (make check-arm64) the
    host's /bin/sh that execs qemu would try the arm64 shims itself ("cannot be preloaded ... ignored" on
    stderr, a second line where a test wants one): qemu-user hands QEMU_SET_ENV to the emulated process
    only, whose own loader preloads them."""
    if EMULATED:
        return {"QEMU_SET_ENV": "LD_PRELOAD=" + preload(*shims)}
    return {"LD_PRELOAD": preload(*shims)}
# Directories the tests make (the run directory among them) must not come out group-writable under
# a lax umask: setup refuses a run directory that others could write, as it should.
os.umask(0o022)


PLUGIN_SPEC = "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json"


def plugin_spec(m, version, with_libcuda=True):
    """A device plugin spec like k8s-device-plugin writes (JSON, uuid-named devices, no 'all')."""
    lib = f"/run/nvidia/driver/lib/{ARCH}"
    mounts = [{"hostPath": f"{lib}/libnvidia-ml.so.{version}", "containerPath": f"/lib/{ARCH}/libnvidia-ml.so.{version}",
               "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}]
    if with_libcuda:
        mounts.insert(0, {"hostPath": f"{lib}/libcuda.so.{version}", "containerPath": f"/lib/{ARCH}/libcuda.so.{version}",
                          "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]})
    return json.dumps({
        "cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu",
        "devices": [{"name": "GPU-00000000-1111-2222-3333-444455556666",
                     "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"}]}}],
        "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"],
                           "deviceNodes": [{"path": "/dev/nvidiactl", "hostPath": "/dev/nvidiactl"}],
                           "mounts": mounts}})


HOST_MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}[os.uname().machine]
CONTAINERD_DIR = os.environ.get("DEBIAN_CONTAINERD", "")


def containerd_binary(version):
    """Debian's containerd binary of that major version (tests/debian/fetch-containerd.sh): trixie's
    1.7 for "1.x", sid's 2.x for anything newer."""
    suite = "trixie" if str(version).split(".")[0] in ("0", "1") else "sid"
    path = os.path.join(CONTAINERD_DIR, suite, "usr/bin/containerd")
    if not CONTAINERD_DIR or not os.path.exists(path):
        raise RuntimeError(f"Debian's containerd of {suite} is not in DEBIAN_CONTAINERD={CONTAINERD_DIR!r}: "
                           "run tests/debian/fetch-containerd.sh (make check does)")
    return path


def place_host_file(src, dst):
    """A hard link of a file of this host (its target when it is a link) at dst, else a copy."""
    src = os.path.realpath(src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        raise RuntimeError(f"fixture {path} missing: build the project first (FIXTURE_DIR={FIXTURES!r})")
    return path


def proc_version_text(version, open_module=False):
    if open_module:
        return (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
                "(dvs-builder@U16-I3-B13-4-3)  Mon Mar  3 10:00:00 UTC 2025\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    return (f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def pe_image(payload=b""):
    """The start of a Windows PE file, as the DLSS DLLs are: the DOS header ("MZ", e_lfanew at 0x3c pointing
    just past it) and the "PE\\0\\0" signature there, then `payload`."""
    return b"MZ" + b"\0" * 58 + (64).to_bytes(4, "little") + b"PE\0\0" + payload


def no_openat2():
    """The environment that makes the binaries walk paths in user space, as the units' sandbox does
    (openat2 fails with ENOSYS there)."""
    return preload_env(fixture("no_openat2_shim.so"))


def with_and_without_openat2(body):
    """Runs body(env) with openat2 and with it forced absent; a failure says which."""
    # Not subTest(): the TAP result reports only whole tests, and a failing subtest would vanish.
    for label, env in (("openat2", None), ("openat2 forced absent", no_openat2())):
        try:
            body(env)
        except AssertionError as e:
            raise AssertionError(f"[{label}] {e}") from e


def write(path, content, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)
    os.chmod(path, mode)


def make_chardev(path, major, minor, mode=0o666):
    """A fake device node. mknod needs root, which CI has; without it, fail loudly."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chmod(path, mode)  # mknod applies the umask


class MachineRoot:
    """A fake machine root: staging trees, /dev nodes, /proc/driver/nvidia, optional config."""

    def __init__(self, testcase=None, tmp=None):
        self.path = tmp or tempfile.mkdtemp(prefix="unbounded-test-")
        if testcase is not None:
            testcase.addCleanup(self.cleanup)

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)

    def p(self, absolute):
        return os.path.join(self.path, absolute.lstrip("/"))

    # -- staging layouts -------------------------------------------------------------------------
    def stage_ubuntu(self, version, n=0, unrelated=True, extra_unrelated=0, setuid=False):
        """Host lib dir like Ubuntu's: regular lib*.so.<v> files with SONAME links beside them."""
        d = self.p(f"/run/host-nvidia/{n}")
        os.makedirs(d, exist_ok=True)
        for lib, soname in DRIVER_LIBS.items():
            name = f"{lib}.so.{version}"
            shutil.copy(fixture(name), os.path.join(d, name))
            if setuid:
                os.chmod(os.path.join(d, name), 0o6755)
            if soname:
                os.symlink(name, os.path.join(d, soname))
        os.symlink("libcuda.so.1", os.path.join(d, "libcuda.so"))
        os.makedirs(os.path.join(d, "vdpau"), exist_ok=True)
        for lib, soname in VDPAU_LIBS.items():
            name = f"{lib}.so.{version}"
            shutil.copy(fixture(name), os.path.join(d, "vdpau", name))
            os.symlink(name, os.path.join(d, "vdpau", soname))
        for name, soname in COMPANIONS.items():
            shutil.copy(fixture(name), os.path.join(d, name))
            os.symlink(name, os.path.join(d, soname))
        if unrelated:
            self.add_unrelated(d, extra_unrelated)
        return d

    @staticmethod
    def add_unrelated(d, extra=0):
        """The rest of a host lib dir: unrelated libraries that must never be taken."""
        for name in UNRELATED:
            shutil.copy(fixture(name), os.path.join(d, name))
        for i in range(extra):
            os.link(os.path.join(d, "libz.so.1.2.13"), os.path.join(d, f"libunrelated{i}.so.{i % 7}.{i}"))

    # Debian keeps these directly in the lib dir, not in nvidia/current/ (libnvidia-eglcore, -glcore).
    DEBIAN_LIBDIR_LIBS = ("libnvidia-eglcore", "libnvidia-glcore")

    def stage_debian(self, version, n=0, extra_unrelated=0):
        """Debian as its packages install it: real files in nvidia/current/ with relative SONAME links, and in
        the lib dir the links nvidia-alternative's postinst makes, LINK -> /etc/alternatives/nvidia--NAME-<arch>
        (which the host does not bind), libnvidia-nvvm's version-named one among them."""
        d = self.p(f"/run/host-nvidia/{n}")
        cur = os.path.join(d, "nvidia", "current")
        os.makedirs(cur, exist_ok=True)

        def alternative(name):
            os.symlink(f"/etc/alternatives/nvidia--{name}-{ARCH}", os.path.join(d, name))

        for lib, soname in DRIVER_LIBS.items():
            name = f"{lib}.so.{version}"
            if lib in self.DEBIAN_LIBDIR_LIBS:
                shutil.copy(fixture(name), os.path.join(d, name))
                continue
            shutil.copy(fixture(name), os.path.join(cur, name))
            if soname:
                os.symlink(name, os.path.join(cur, soname))
                alternative(soname)
        nvvm = f"libnvidia-nvvm.so.{version}"
        shutil.copy(fixture(nvvm), os.path.join(cur, nvvm))
        os.symlink(nvvm, os.path.join(cur, "libnvidia-nvvm.so.4"))
        alternative("libnvidia-nvvm.so.4")
        alternative(nvvm)
        self.add_unrelated(d, extra_unrelated)
        return d

    def stage_bin(self, version, n=1, setuid_smi=False):
        d = self.p(f"/run/host-nvidia/{n}")
        os.makedirs(d, exist_ok=True)
        for h in HELPERS:
            shutil.copy(fixture(f"nvidia-smi-{version}"), os.path.join(d, h))
            os.chmod(os.path.join(d, h), 0o4755 if setuid_smi else 0o755)
        write(os.path.join(d, "unrelated-tool"), "#!/bin/sh\n", 0o755)
        return d

    def stage_firmware(self, version, n=2):
        d = self.p(f"/run/host-nvidia/{n}/nvidia/{version}")
        for name in ("gsp_ga10x.bin", "gsp_tu10x.bin"):
            write(os.path.join(d, name), (version + name).encode() * 1000)
        return d

    def stage_all(self, version, layout="ubuntu", **kw):
        if layout == "ubuntu":
            self.stage_ubuntu(version, **kw)
        else:
            self.stage_debian(version)
        self.stage_bin(version)
        self.stage_firmware(version)

    def clear_staging(self):
        shutil.rmtree(self.p("/run/host-nvidia"), ignore_errors=True)

    # -- kernel side ----------------------------------------------------------------------------
    def set_proc_version(self, version, open_module=False):
        write(self.p("/proc/driver/nvidia/version"), proc_version_text(version, open_module))

    def add_gpu(self, minor, bus, uuid, model="NVIDIA H100 80GB HBM3"):
        write(self.p(f"/proc/driver/nvidia/gpus/{bus}/information"),
              f"Model: \t\t {model}\nIRQ:   \t\t 150\nGPU UUID: \t {uuid}\n"
              f"Video BIOS: \t 96.00.74.00.0d\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
              f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
              "GPU Excluded:\t No\n")
        make_chardev(self.p(f"/dev/nvidia{minor}"), 195, minor)

    def add_control_nodes(self, uvm_major=509, modeset=True):
        make_chardev(self.p("/dev/nvidiactl"), 195, 255)
        make_chardev(self.p("/dev/nvidia-uvm"), uvm_major, 0)
        make_chardev(self.p("/dev/nvidia-uvm-tools"), uvm_major, 1)
        if modeset:
            make_chardev(self.p("/dev/nvidia-modeset"), 195, 254)

    # -- MIG and IMEX (the layout of a real driver: nv-caps numbers 15 GIs x (1 + 8 CIs) per GPU) --
    CAPS_MAJOR = 508
    IMEX_MAJOR = 237

    @staticmethod
    def cap_minor(gpu, gi, ci=None):
        base = 3 + gpu * 135 + gi * 9
        return base if ci is None else base + 1 + ci

    # The fabric and peer drivers' majors (dynamic, as on a real host).
    NVSWITCH_MAJOR = 236
    GDRDRV_MAJOR = 235
    NVIDIA_FS_MAJOR = 234

    def write_proc_devices(self, fabric=False):
        extra = (f"{self.NVSWITCH_MAJOR} nvidia-nvswitch\n{self.GDRDRV_MAJOR} gdrdrv\n{self.NVIDIA_FS_MAJOR} nvidia-fs\n"
                 if fabric else "")
        write(self.p("/proc/devices"),
              "Character devices:\n  1 mem\n  4 /dev/vc/0\n  5 /dev/tty\n 10 misc\n195 nvidia-frontend\n"
              f"{self.IMEX_MAJOR} nvidia-caps-imex-channels\n{self.CAPS_MAJOR} nvidia-caps\n509 nvidia-uvm\n{extra}"
              "\nBlock devices:\n  7 loop\n  8 sd\n259 blkext\n")

    def add_ipc(self):
        """nvidia-persistenced's and the fabric manager's sockets (bound: the returned sockets keep them)
        and the MPS pipe directory, as the daemons leave them."""
        import socket
        socks = []
        for path in ("/run/nvidia-persistenced/socket", "/run/nvidia-fabricmanager/socket"):
            os.makedirs(os.path.dirname(self.p(path)), exist_ok=True)
            s = socket.socket(socket.AF_UNIX)
            s.bind(self.p(path))
            socks.append(s)
        os.makedirs(self.p("/tmp/nvidia-mps"), mode=0o755, exist_ok=True)
        os.chmod(self.p("/tmp/nvidia-mps"), 0o755)
        return socks

    def add_fabric(self, nvswitches=(), gdrcopy=False, gds=()):
        """The nodes an HGX host's nvidia-nvswitch, gdrdrv and nvidia-fs drivers make (root's, 0666 as
        nvidia-modprobe and the drivers' udev rules leave them; nvswitch's are 0600 by its procfs)."""
        self.write_proc_devices(fabric=True)
        for n in nvswitches:
            make_chardev(self.p(f"/dev/nvidia-nvswitch{n}"), self.NVSWITCH_MAJOR, n, 0o600)
        if nvswitches:
            make_chardev(self.p("/dev/nvidia-nvswitchctl"), self.NVSWITCH_MAJOR, 255, 0o600)
        if gdrcopy:
            make_chardev(self.p("/dev/gdrdrv"), self.GDRDRV_MAJOR, 0, 0o666)
        for n in gds:
            make_chardev(self.p(f"/dev/nvidia-fs{n}"), self.NVIDIA_FS_MAJOR, n, 0o666)

    def write_mig_minors(self, gpus=8):
        """Like the kernel's: every possible instance, whether it exists or not."""
        lines = ["config 1", "monitor 2"]
        for g in range(gpus):
            for gi in range(15):
                lines.append(f"gpu{g}/gi{gi}/access {self.cap_minor(g, gi)}")
                lines += [f"gpu{g}/gi{gi}/ci{ci}/access {self.cap_minor(g, gi, ci)}" for ci in range(8)]
        write(self.p("/proc/driver/nvidia-caps/mig-minors"), "\n".join(lines) + "\n")

    def add_mig(self, gpu_minor, instances, nodes=True):
        """instances: {gi: [ci, ...]}; a GI with an empty list has no compute instance."""
        self.write_proc_devices()
        if not os.path.exists(self.p("/proc/driver/nvidia-caps/mig-minors")):
            self.write_mig_minors()
        caps = self.p(f"/proc/driver/nvidia/capabilities/gpu{gpu_minor}/mig")
        for gi, cis in instances.items():
            for ci in [None] + list(cis):
                rel = f"gi{gi}" + ("" if ci is None else f"/ci{ci}")
                minor = self.cap_minor(gpu_minor, gi, ci)
                write(os.path.join(caps, rel, "access"), f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
                if nodes:
                    make_chardev(self.p(f"/dev/nvidia-caps/nvidia-cap{minor}"), self.CAPS_MAJOR, minor, 0o444)
        for name in ("config", "monitor"):  # exist on every MIG-capable machine, never exposed
            write(self.p(f"/proc/driver/nvidia/capabilities/mig/{name}"), "DeviceFileMinor: 1\nDeviceFileMode: 256\n")
            make_chardev(self.p(f"/dev/nvidia-caps/nvidia-cap{1 if name == 'config' else 2}"), self.CAPS_MAJOR,
                         1 if name == "config" else 2, 0o400)

    def add_imex_channels(self, ids):
        self.write_proc_devices()
        for i in ids:
            make_chardev(self.p(f"/dev/nvidia-caps-imex-channels/channel{i}"), self.IMEX_MAJOR, i, 0o666)

    def config(self, text):
        write(self.p("/etc/unbounded/nvidia.yaml"), text)

    def install_containerd(self, version, path="/usr/bin/containerd", binary=None):
        """Debian's real containerd of the major `version` names (trixie's 1.7, sid's 2.x), or
        `binary`, at `path`, with the C library it runs on: verify runs it chrooted into this root to
        learn what it makes of the root's configuration (`config dump`), as it runs the machine's own."""
        place_host_file(binary or containerd_binary(version), self.p(path))
        os.chmod(self.path, 0o755)  # a machine's /, which mkdtemp made 0700: containerd runs there as nobody
        for lib in ("/lib64/ld-linux-x86-64.so.2", f"/lib/{HOST_MULTIARCH}/libc.so.6"):
            place_host_file(lib, self.p(lib))
        return self

    def standard(self, version=V1, layout="ubuntu", gpus=1, **kw):
        """A complete single-driver machine."""
        self.stage_all(version, layout, **kw)
        self.set_proc_version(version)
        self.add_control_nodes()
        for i in range(gpus):
            self.add_gpu(i, f"0000:{0x18 + i:02x}:00.0", f"GPU-{i:08x}-1111-2222-3333-444455556666")
        return self

    # -- running --------------------------------------------------------------------------------
    @staticmethod
    def run_env(env=None):
        """The binaries' environment: ours, without a service manager or another root to talk to."""
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        e.pop("JOURNAL_STREAM", None)
        e.pop("UNBOUNDED_NVIDIA_ROOT", None)
        e.update(env or {})
        return e

    def run(self, *args, binary=None, env=None, timeout=60):
        cmd = [binary or SETUP, "--root", self.path, *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.run_env(env), timeout=timeout)

    def setup(self, *args, **kw):
        r = self.run("--json", "setup", *args, **kw)
        try:
            r.result = json.loads(r.stdout) if r.stdout.strip() else None
        except json.JSONDecodeError:
            r.result = None
        return r

    def driver_root(self):
        return self.p("/run/nvidia/driver")

    def libdir(self):
        return os.path.join(self.driver_root(), "lib", ARCH)


def snapshot(path):
    """Every entry under path: relative name -> ('file', bytes-hash, mode) or ('link', target)."""
    import hashlib
    out = {}
    if not os.path.lexists(path):
        return None
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif not stat.S_ISREG(st.st_mode):
                out[rel] = ("special", st.st_mode, st.st_rdev)
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", hashlib.sha256(f.read()).hexdigest(), stat.S_IMODE(st.st_mode))
    return out


class TapResult(unittest.TextTestResult):
    """Prints one TAP line per test so meson (protocol: 'tap') counts every case."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.n = 0
        self.sub_failures = {}

    def addSubTest(self, test, subtest, err):
        # unittest reports neither success nor failure of a test whose subtests failed: its line, with
        # each failed subtest's reason, is printed when it stops (else only "too few tests" said so).
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.sub_failures.setdefault(test.id(), []).append(f"{subtest.id()}\n" + self._exc_info_to_string(err, test))

    def stopTest(self, test):
        failed = self.sub_failures.pop(test.id(), None)
        if failed:
            self._line(False, test, "\n".join(failed))
        super().stopTest(test)

    def _line(self, ok, test, detail=""):
        self.n += 1
        name = test.id().split(".", 1)[-1]
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}", flush=True)
        for line in detail.splitlines():
            print(f"# {line}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(True, test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(False, test, self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._line(False, test, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        # A skipped test is a failure here: a missing prerequisite must be loud in CI.
        super().addSkip(test, reason)
        self._line(False, test, "skipped: " + reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line(False, test, "expected failure is not allowed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line(False, test, "unexpected success")


def main():
    module = sys.modules["__main__"]
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    if len(sys.argv) > 1:  # run only tests whose id contains an argument
        flat = []

        def walk(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                else:
                    flat.append(t)
        walk(suite)
        suite = unittest.TestSuite([t for t in flat if any(a in t.id() for a in sys.argv[1:])])
    print(f"1..{suite.countTestCases()}", flush=True)
    with open(os.devnull, "w") as devnull:
        runner = unittest.TextTestRunner(stream=devnull, resultclass=TapResult, verbosity=0)
        result = runner.run(suite)
    sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
