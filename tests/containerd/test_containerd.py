#!/usr/bin/env python3
"""Issue 33, item 1: GPU pods through containerd's CRI in a booted machine.

A Debian trixie machine (systemd 257, Debian's containerd 1.7.24 and its own containerd.service, runc)
built by mkosi from tests/containerd/mkosi.conf.d/, with the project installed on top, booted with
systemd-nspawn on the unified cgroup hierarchy with bpf() allowed (runc's systemd cgroup driver
enforces device rules there). Its staging is Debian's real 535 driver (build/nvidia-debs, laid out
by debian_hosts.py as the podman tier does), bound read-only at /run/host-nvidia/N, with fake
/dev/nvidia* nodes (no driver: an allowed node opens with ENXIO, a denied one with EPERM) and a fake
module version. The test plays kubelet over /run/containerd/containerd.sock (cri.py), and each case
asserts what the container itself sees, through ExecSync.

Two boots serve every case: the scenario in the machine is a small command loop the host test drives
(`Node.sh`), so one boot holds many pods. Boot 1: ordering, the units, pods by CDIDevices and by
annotation, by index and UUID, an unknown device, no device, a daemon-reload, a host driver upgrade
under the old module (pending-host-reboot). Boot 2 (the new module loaded): a pod gets the new driver,
then CDI switched off, then a library removed from the driver root."""

import hashlib
import json
import os
import shutil
import time
import unittest
import uuid

import cri
import probe_image
from unbounded_tests import debian_hosts as dh
from unbounded_tests.harness import ARCH, main, make_chardev, proc_version_text
from unbounded_tests.image import SOURCE, base_image
from unbounded_tests.machine import Machine

HERE = os.path.dirname(os.path.abspath(__file__))

CACHE = os.environ.get("UNBOUNDED_CONTAINERD_CACHE", "/var/tmp/unbounded-nvidia-containerd")
BUILD = os.environ.get("BUILD_ROOT", os.path.join(SOURCE, "build"))
LIB = "/usr/lib/x86_64-linux-gnu"
UUIDS = [f"GPU-{i:08x}-8e4b-4d0e-9c1a-2b7e6d5f4a10" for i in range(2)]
# The host recipe's binds (as the podman tier's), one staging slot each.
BINDS = [LIB, "/usr/lib/nvidia/current", "/usr/share/glvnd/egl_vendor.d", "/usr/share/vulkan", "/etc/OpenCL/vendors"]
NODES = [("nvidiactl", 195, 255), ("nvidia-modeset", 195, 254), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1),
         ("nvidia0", 195, 0), ("nvidia1", 195, 1)]
ALL_NODES = sorted(f"/dev/{n}" for n, _, _ in NODES)
REQUIRED = ("systemd-nspawn", "mkosi", "debootstrap", "unshare", "journalctl", "protoc", "readelf", "dpkg-deb")
# systemd's catalogue: a job finished ("Finished ..."), a job began ("Starting ...").
JOB_DONE = "39f53479d3a045ac8e11786248231fbf"
JOB_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"

# containerd 1.7's CRI plugin: CDI is off by default there; runc with the systemd cgroup driver, as
# kubelet's systemd driver needs; the sandbox (pause) image is the local probe image (no registry).
CONTAINERD_CONFIG = """# Written by the containerd tier (tests/containerd/test_containerd.py)
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = {enable_cdi}
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  sandbox_image = "{image}"
  # containerd gives a sandbox oom_score_adj -998, which needs CAP_SYS_RESOURCE: this test host has
  # none to give the machine (its own bounding set lacks it), so pods keep containerd's own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
        # nspawn's system call filter refuses keyctl(): no session keyring per container (as the
        # system tier's runc runs with --no-new-keyring)
        NoNewKeyring = true
        # runc itself, less the CPU resources this host's cgroup tree cannot take (see the script)
        BinaryName = "/usr/local/libexec/unbounded-test/runc"
"""

# The scenario: hand the host turn 1 at once and run the commands it writes (cmd-N, atomically
# renamed into place) until it is done; then the machine powers off.
AGENT = """
touch $out/host-turn-1
n=1
while [ ! -e $out/host-done-1 ]; do
	if [ -e $out/cmd-$n ]; then
		sh $out/cmd-$n > $out/cmd-$n.out 2>&1
		echo $? > $out/cmd-$n.rc.tmp
		mv $out/cmd-$n.rc.tmp $out/cmd-$n.rc
		n=$((n + 1))
	else
		sleep 0.1
	fi
done
"""

# What a GPU pod's container reports: its GPU nodes, what opening an allowed node gives (ENXIO: no
# driver behind it) and a node it was not given (EPERM: the device rules are enforced), the libraries
# its own loader resolves, their checksums, and nvidia-smi's complaint.
PROBE = """
for n in /dev/nvidia*; do [ -e "$n" ] && echo "NODE $n"; done
for n in /dev/nvidia*; do [ -c "$n" ] && { (exec 3<"$n") 2>/tmp/err; echo "OPEN $n $(cat /tmp/err)"; }; done
mknod /tmp/denied c 195 77 && { (exec 3</tmp/denied) 2>/tmp/err; echo "DENIED $(cat /tmp/err)"; }
/usr/lib64/ld-linux-x86-64.so.2 --preload 'libcuda.so.1 libnvidia-ml.so.1' --list /usr/bin/true 2>&1 | while read -r l; do echo "LD $l"; done
sha256sum /usr/lib/@ARCH@/libcuda.so.@V@ /usr/lib/@ARCH@/libnvidia-ml.so.@V@ 2>&1 | while read -r l; do echo "SUM $l"; done
nvidia-smi > /tmp/smi 2>&1; echo "SMI rc=$? $(cat /tmp/smi)"
true
"""

RELOAD_PROBE = 'for n in /dev/nvidia0 /dev/nvidiactl; do (exec 3<"$n") 2>/tmp/err; echo "OPEN $n $(cat /tmp/err)"; done'


def missing_prerequisites():
    missing = [t for t in REQUIRED if not shutil.which(t)]
    for module in ("grpc", "google.protobuf"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"python module {module}")
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Node:
    """One booted machine session: the host side of the command loop, and the CRI client."""

    def __init__(self, m, pb):
        self.m = m
        self.pb = pb
        self.n = 0
        self.cri = None

    def sh(self, script, timeout=60):
        """Runs `script` with sh in the machine; returns (rc, output)."""
        self.n += 1
        path = self.m.p(f"/var/lib/standin/cmd-{self.n}")
        with open(path + ".tmp", "w") as f:
            f.write(script + "\n")
        os.rename(path + ".tmp", path)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path + ".rc"):
            if time.monotonic() > deadline:
                raise AssertionError(f"the machine did not run {script!r} within {timeout}s")
            time.sleep(0.1)
        with open(path + ".rc") as f:
            rc = int(f.read())
        with open(path + ".out") as f:
            return rc, f.read()

    def connect(self):
        sock = self.m.host("containerd-run/containerd.sock")
        self.cri = cri.CRI(self.pb, sock)
        return self.cri

    def reconnect(self):
        """A new channel after containerd restarted (the old one's connection is gone)."""
        self.cri.close()
        return self.connect()

    def pod(self, name, cdi=(), annotations=None):
        """RunPodSandbox (host network, so the node's UTS namespace and no hostname; systemd cgroup parent as kubelet's systemd driver names it),
        then CreateContainer and StartContainer of the probe image asking for `cdi` devices through
        CRI's CDIDevices field and `annotations`. Returns the container's id; raises grpc.RpcError."""
        pb = self.pb
        uid = uuid.uuid4().hex
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=0),
            log_directory=f"/var/log/pods/default_{name}_{uid}",
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=f"kubepods-besteffort-pod{uid}.slice",
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=pb.NamespaceOption(network=pb.NODE))))
        sandbox = self.cri.RunPodSandbox(pb.RunPodSandboxRequest(config=config)).pod_sandbox_id
        container = self.cri.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox, sandbox_config=config,
            config=pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="probe"), image=pb.ImageSpec(image=probe_image.NAME),
                command=["/usr/bin/sleep", "3600"], log_path="probe.log", annotations=annotations or {},
                CDI_devices=[pb.CDIDevice(name=d) for d in cdi], linux=pb.LinuxContainerConfig()))).container_id
        self.cri.StartContainer(pb.StartContainerRequest(container_id=container))
        return sandbox, container

    def exec(self, container, script):
        r = self.cri.ExecSync(self.pb.ExecSyncRequest(container_id=container, cmd=["/bin/sh", "-c", script], timeout=60))
        return r.exit_code, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")

    def remove(self, sandbox):
        self.cri.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=sandbox))
        self.cri.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox))

    def probe(self, name, version, cdi=(), annotations=None):
        """A pod's probe report, or {"error": ...} when containerd refused it."""
        try:
            sandbox, container = self.pod(name, cdi, annotations)
        except self.cri.grpc.RpcError as e:
            return {"error": f"{e.code()}: {e.details()}"}
        rc, out = self.exec(container, PROBE.replace("@ARCH@", ARCH).replace("@V@", version))
        self.remove(sandbox)
        return {"rc": rc, "out": out}


def parse(report):
    out = report.get("out", "")
    lines = out.splitlines()
    return {
        "nodes": sorted(l.split()[1] for l in lines if l.startswith("NODE ")),
        "open": {l.split()[1]: l for l in lines if l.startswith("OPEN ")},
        "denied": [l for l in lines if l.startswith("DENIED ")],
        "ld": "\n".join(l for l in lines if l.startswith("LD ")),
        "sums": {l.split()[-1]: l.split()[1] for l in lines if l.startswith("SUM ") and len(l.split()) == 3},
        "smi": "\n".join(l for l in lines if l.startswith("SMI ") or not l.startswith(("NODE", "OPEN", "DENIED", "LD", "SUM"))),
        "out": out,
    }


class ContainerdTier(unittest.TestCase):
    """Boots the machine twice in setUpClass and records what each case saw; each test asserts one."""

    @classmethod
    def setUpClass(cls):
        missing = missing_prerequisites()
        if missing:  # a failure, not a skip: CI must not go green without this tier
            raise RuntimeError(f"the containerd tier needs {', '.join(missing)} (make check installs CONTAINERD_DEPS; run as root)")
        cls.tmp = os.path.join(BUILD, "containerd-tier")
        shutil.rmtree(cls.tmp, ignore_errors=True)
        os.makedirs(cls.tmp)
        cls.pb = cri.generate(BUILD)
        cls.old = dh.HostTree(os.path.join(cls.tmp, "host-535"))
        dh.install_debian(cls.old, "bookworm-535")
        cls.new = dh.HostTree(os.path.join(cls.tmp, "host-550"))
        dh.install_debian(cls.new, "trixie-550")
        cls.v1, cls.v2 = cls.version(cls.old), cls.version(cls.new)
        cls.seen = {}
        cls.errors = []
        base = base_image(HERE, CACHE)
        owner = type("ClassCleanups", (), {"addCleanup": staticmethod(cls.addClassCleanup)})()
        cls.m = m = Machine(owner, "containerd", base=base, real_containerd=True)
        m.enforce_device_rules()
        cls.staging = []
        for n, path in enumerate(BINDS):
            d = m.host(f"staging/{n}")
            shutil.copytree(cls.old.p(path), d, symlinks=True) if os.path.isdir(cls.old.p(path)) else os.makedirs(d)
            cls.staging.append(d)
            m.bind(d, f"/run/host-nvidia/{n}", read_only=True)
        for name, major, minor in NODES:
            node = m.host(f"dev/{name}")
            make_chardev(node, major, minor)
            m.bind(node, f"/dev/{name}")
        m.fake_module(proc_version_text(cls.v1))
        cls.fake_proc_devices(m)
        for i, uid in enumerate(UUIDS):
            bus = f"0000:{0x18 + i:02x}:00.0"
            info = m.host(f"proc-driver/nvidia/gpus/{bus}/information")
            with open(info, "w") as f:
                f.write(f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 150\nGPU UUID: \t {uid}\nVideo BIOS: \t 96.00.74.00.0d\n"
                        f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\n"
                        f"Device Minor: \t {i}\nGPU Excluded:\t No\n")
        # containerd copies the node's /etc/hosts into every host-network pod; the image has none.
        m.write("/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        m.write("/etc/unbounded/nvidia.yaml", "refresh:\n  settle_time: 2s\n")
        m.write("/etc/containerd/config.toml", CONTAINERD_CONFIG.format(enable_cdi="true", image=probe_image.NAME))
        os.makedirs(m.p("/usr/local/libexec/unbounded-test"), exist_ok=True)
        shutil.copy(os.path.join(HERE, "runc-no-cpu-controller"),
                    m.p("/usr/local/libexec/unbounded-test/runc"))
        os.makedirs(m.p("/var/lib/unbounded-test"), exist_ok=True)
        probe_image.build(base, m.p("/var/lib/unbounded-test/probe.tar"))
        run = m.host("containerd-run")
        os.makedirs(run, exist_ok=True)
        m.bind(run, "/run/containerd")
        t0 = time.monotonic()
        cls.session(cls.first_boot)
        cls.seen["boot1_s"] = time.monotonic() - t0
        m.fake_module(proc_version_text(cls.v2))  # the host rebooted into the new module
        t0 = time.monotonic()
        cls.session(cls.second_boot)
        cls.seen["boot2_s"] = time.monotonic() - t0
        print(f"# boot 1 took {cls.seen['boot1_s']:.0f}s, boot 2 {cls.seen['boot2_s']:.0f}s", flush=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    @staticmethod
    def fake_proc_devices(m):
        """The drivers' majors in /proc/devices, as on a host with the NVIDIA modules loaded (setup takes
        a node only with its driver's major): this host's list with nvidia-frontend and nvidia-uvm
        added, bound over /proc/devices before setup by a unit like the fake module's."""
        with open("/proc/devices") as f:
            lines = f.read().splitlines()
        at = lines.index("Character devices:") + 1
        lines[at:at] = ["195 nvidia-frontend", "509 nvidia-uvm"]
        m.write("/var/lib/unbounded-test/proc-devices", "\n".join(lines) + "\n")
        m.write("/etc/systemd/system/fake-proc-devices.service",
                "[Unit]\nDescription=Fake /proc/devices with the NVIDIA majors (containerd tier)\nDefaultDependencies=no\n"
                "After=local-fs.target\nBefore=sysinit.target unbounded-nvidia-setup.service\n\n[Service]\nType=oneshot\n"
                "RemainAfterExit=yes\nExecStart=/bin/mount --bind /var/lib/unbounded-test/proc-devices /proc/devices\n")
        os.makedirs(m.p("/etc/systemd/system/sysinit.target.wants"), exist_ok=True)
        os.symlink("/etc/systemd/system/fake-proc-devices.service", m.p("/etc/systemd/system/sysinit.target.wants/fake-proc-devices.service"))

    @staticmethod
    def version(host):
        return [n for n in os.listdir(host.p(f"{LIB}/nvidia/current"))
                if n.startswith("libcuda.so.") and n.count(".") == 4][0][len("libcuda.so."):]

    @classmethod
    def session(cls, steps):
        """One boot: `steps(node)` runs as the host's turn while the machine runs its command loop. An
        exception in it ends the turn (so the machine powers off) and is raised after the boot."""
        node = Node(cls.m, cls.pb)
        failure = []

        def turn():
            try:
                node.connect()
                steps(node)
            except BaseException as e:  # noqa: B902 -- re-raised below, once the machine is down
                failure.append(e)
            finally:
                if node.cri:
                    node.cri.close()
        cls.m.boot(AGENT, host_turns=[turn], timeout=900)
        if failure:
            journal = "\n".join(msg for _, _, msg in cls.m.messages("_SYSTEMD_UNIT=containerd.service"))
            raise RuntimeError(f"a step failed in the booted machine; containerd's journal ends:\n{journal[-3000:]}\n"
                               f"console:\n{cls.m.console[-2000:]}") from failure[0]

    @classmethod
    def first_boot(cls, node):
        seen = cls.seen
        seen["show"] = node.sh("systemctl show containerd.service -p Requires -p After -p ActiveState")
        # systemd-analyze runs no generators: the generator's directories go into its unit path.
        seen["analyze"] = node.sh("cd /; SYSTEMD_UNIT_PATH=/etc/systemd/system:/run/systemd/generator.early:"
                                  "/run/systemd/generator:/usr/lib/systemd/system:/run/systemd/generator.late "
                                  "systemd-analyze verify --man=no unbounded-nvidia-setup.service "
                                  "unbounded-nvidia-refresh.service unbounded-nvidia-refresh.path unbounded-nvidia-refresh.timer "
                                  "unbounded-nvidia-license-reload.service unbounded-nvidia-license-reload.path "
                                  "unbounded-nvidia-license-reload.timer unbounded-nvidia-license-install.service containerd.service 2>&1")
        seen["systemd"] = node.sh("systemctl --version | head -1")
        seen["containerd"] = node.sh("containerd --version")
        seen["import"] = node.sh("ctr -n k8s.io images import /var/lib/unbounded-test/probe.tar", timeout=120)
        seen["root_sums_1"] = node.sh(f"sha256sum /run/nvidia/driver/lib/{ARCH}/libcuda.so.{cls.v1} "
                                      f"/run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{cls.v1}")
        seen["field-all"] = node.probe("field-all", cls.v1, cdi=["nvidia.com/gpu=all"])
        seen["annotation-all"] = node.probe("annotation-all", cls.v1, annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"})
        seen["index-0"] = node.probe("index-0", cls.v1, cdi=["nvidia.com/gpu=0"])
        seen["uuid-1"] = node.probe("uuid-1", cls.v1, cdi=[f"nvidia.com/gpu={UUIDS[1]}"])
        seen["unknown"] = node.probe("unknown", cls.v1, cdi=["nvidia.com/gpu=7"])
        seen["none"] = node.probe("none", cls.v1)
        # A daemon-reload while a pod runs: systemd re-applies the scope's DeviceAllow= (containerd's
        # runc with the systemd cgroup driver made it from the /dev/char links).
        sandbox, container = node.pod("reload", cdi=["nvidia.com/gpu=all"])
        seen["reload-before"] = node.exec(container, RELOAD_PROBE + "; mknod /tmp/d c 195 77; (exec 3</tmp/d) 2>&1 || true")
        seen["reload"] = node.sh("systemctl daemon-reload")
        seen["reload-after"] = node.exec(container, RELOAD_PROBE + "; (exec 3</tmp/d) 2>&1 || true")
        node.remove(sandbox)
        # The host upgrades its driver (535 -> 550) under the staging mounts with the 535 module still
        # loaded: the path unit's refresh keeps the live root (pending-host-reboot).
        for n, path in enumerate(BINDS):
            src = cls.m.host(f"upgrade/{n}")  # on the staging's filesystem, to be renamed in
            shutil.copytree(cls.new.p(path), src, symlinks=True) if os.path.isdir(cls.new.p(path)) else os.makedirs(src)
            live = cls.staging[n]
            for e in os.listdir(live):
                p = os.path.join(live, e)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
            for e in os.listdir(src):
                os.rename(os.path.join(src, e), os.path.join(live, e))
        seen["pending-status"] = node.sh("for i in $(seq 120); do grep -q '\"outcome\": \"pending-host-reboot\"' "
                                         "/run/unbounded-nvidia/status.json && break; sleep 0.25; done; "
                                         "cat /run/unbounded-nvidia/status.json", timeout=60)
        seen["pending"] = node.probe("pending", cls.v1, cdi=["nvidia.com/gpu=all"])

    @classmethod
    def second_boot(cls, node):
        seen = cls.seen
        seen["root_sums_2"] = node.sh(f"sha256sum /run/nvidia/driver/lib/{ARCH}/libcuda.so.{cls.v2} "
                                      f"/run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{cls.v2}")
        seen["restarted"] = node.probe("restarted", cls.v2, cdi=["nvidia.com/gpu=all"])
        # CDI switched off in containerd: the same pod, and what verify says.
        cls.m.write("/etc/containerd/config.toml", CONTAINERD_CONFIG.format(enable_cdi="false", image=probe_image.NAME))
        seen["cdi-off-restart"] = node.sh("systemctl restart containerd.service", timeout=120)
        node.reconnect()
        seen["cdi-off"] = node.probe("cdi-off", cls.v2, cdi=["nvidia.com/gpu=all"])
        seen["cdi-off-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        cls.m.write("/etc/containerd/config.toml", CONTAINERD_CONFIG.format(enable_cdi="true", image=probe_image.NAME))
        seen["cdi-on-restart"] = node.sh("systemctl restart containerd.service", timeout=120)
        node.reconnect()
        # The premise: a library removed from the driver root.
        seen["removed"] = node.sh(f"rm /run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{cls.v2}")
        seen["premise"] = node.probe("premise", cls.v2, cdi=["nvidia.com/gpu=all"])

    # -- the assertions ----------------------------------------------------------------------------
    def ok(self, key):
        self.assertIn(key, self.seen, f"the boot did not get as far as {key}")
        return self.seen[key]

    def assertGpuPod(self, report, root_sums, version, nodes=ALL_NODES):
        """What a pod given `nodes` sees: exactly those GPU nodes, each allowed one opening with ENXIO
        (not EPERM), a node it was not given denied, the loader resolving libcuda and libnvidia-ml to
        the mounted files, byte-identical to the driver root's, and nvidia-smi reaching the driver."""
        self.assertNotIn("error", report, report)
        p = parse(report)
        self.assertEqual(p["nodes"], nodes, p["out"])
        for n in nodes:
            self.assertIn("No such device or address", p["open"].get(n, ""), p["out"])
        self.assertEqual(len(p["denied"]), 1, p["out"])
        self.assertIn("Operation not permitted", p["denied"][0], "the device rules are not enforced")
        self.assertRegex(p["ld"], rf"libcuda\.so\.1 => (/usr)?/lib/{ARCH}/libcuda\.so\.1 ")
        self.assertRegex(p["ld"], rf"libnvidia-ml\.so\.1 => (/usr)?/lib/{ARCH}/libnvidia-ml\.so\.1 ")
        want = {}
        for line in root_sums.splitlines():
            digest, path = line.split()
            want[f"/usr/lib/{ARCH}/{os.path.basename(path)}"] = digest
        self.assertEqual(len(want), 2, root_sums)
        self.assertEqual(p["sums"], want, "the container's libraries are not the driver root's copies")
        for lib in ("libcuda", "libnvidia-ml"):  # and the root's are the host's files of `version`
            host = self.old if version == self.v1 else self.new
            self.assertEqual(want[f"/usr/lib/{ARCH}/{lib}.so.{version}"], sha256(host.p(f"{LIB}/nvidia/current/{lib}.so.{version}")))
        self.assertIn("couldn't communicate with the NVIDIA driver", p["smi"])
        self.assertNotIn("couldn't find libnvidia-ml.so", p["smi"])

    def sums(self, key):
        rc, out = self.ok(key)
        self.assertEqual(rc, 0, out)
        return out

    def test_00_machine_is_trixie_with_containerd_1_7(self):
        self.assertIn("systemd 257", self.ok("systemd")[1])
        self.assertIn(" 1.7.", self.ok("containerd")[1])
        self.assertEqual(self.ok("import")[0], 0, self.ok("import")[1])

    def test_containerd_requires_and_follows_setup(self):
        rc, out = self.ok("show")
        props = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
        self.assertIn("unbounded-nvidia-setup.service", props["Requires"].split(), out)
        self.assertIn("unbounded-nvidia-setup.service", props["After"].split(), out)
        self.assertEqual(props["ActiveState"], "active", out)

    def test_containerd_started_only_after_setup_succeeded_on_each_boot(self):
        entries = self.m.journal("_PID=1")
        boots = []
        for e in entries:
            if e.get("_BOOT_ID") not in boots:
                boots.append(e.get("_BOOT_ID"))
        self.assertEqual(len(boots), 2)
        for b in boots:
            done = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("_BOOT_ID") == b and e.get("MESSAGE_ID") == JOB_DONE
                    and e.get("UNIT") == "unbounded-nvidia-setup.service" and e.get("JOB_RESULT") == "done"]
            start = [int(e["__MONOTONIC_TIMESTAMP"]) for e in entries if e.get("_BOOT_ID") == b
                     and e.get("MESSAGE_ID") == JOB_STARTING and e.get("UNIT") == "containerd.service"]
            self.assertTrue(done, f"boot {b}: setup never finished successfully")
            self.assertTrue(start, f"boot {b}: containerd never started")
            self.assertLess(done[0], start[0], f"boot {b}: containerd started before setup succeeded")

    def test_units_verify_cleanly_on_systemd_257(self):
        rc, out = self.ok("analyze")
        self.assertEqual((rc, out), (0, ""), "systemd-analyze verify complained in the booted machine")

    def test_pod_through_the_cdi_devices_field(self):
        self.assertGpuPod(self.ok("field-all"), self.sums("root_sums_1"), self.v1)

    def test_pod_through_the_cdi_annotation(self):
        self.assertGpuPod(self.ok("annotation-all"), self.sums("root_sums_1"), self.v1)

    def test_pod_by_index_gets_only_that_gpu(self):
        self.assertGpuPod(self.ok("index-0"), self.sums("root_sums_1"), self.v1,
                          nodes=sorted(set(ALL_NODES) - {"/dev/nvidia1"}))

    def test_pod_by_uuid_gets_only_that_gpu(self):
        self.assertGpuPod(self.ok("uuid-1"), self.sums("root_sums_1"), self.v1,
                          nodes=sorted(set(ALL_NODES) - {"/dev/nvidia0"}))

    def test_an_unknown_device_is_refused_at_create(self):
        report = self.ok("unknown")
        self.assertIn("error", report, "a pod asking for nvidia.com/gpu=7 was created")
        self.assertIn("nvidia.com/gpu=7", report["error"])

    def test_a_pod_without_devices_sees_no_gpu(self):
        report = self.ok("none")
        self.assertNotIn("error", report, report)
        p = parse(report)
        self.assertEqual(p["nodes"], [], p["out"])
        self.assertIn("Operation not permitted", "".join(p["denied"]), p["out"])
        self.assertNotIn("libcuda.so.1 =>", p["ld"])

    def test_a_daemon_reload_keeps_the_running_pod_s_gpu(self):
        rc, before = self.ok("reload-before")
        self.assertIn("cannot open /dev/nvidia0: No such device or address", before)
        self.assertIn("Operation not permitted", before, "the device rules are not enforced")
        self.assertEqual(self.ok("reload")[0], 0, self.ok("reload")[1])
        rc, after = self.ok("reload-after")
        self.assertIn("cannot open /dev/nvidia0: No such device or address", after, "the pod lost its GPU across the daemon-reload")
        self.assertIn("cannot open /dev/nvidiactl: No such device or address", after)
        self.assertIn("Operation not permitted", after, "the device rules are gone after the daemon-reload")

    def test_pending_host_reboot_pods_get_the_live_root(self):
        rc, out = self.ok("pending-status")
        status = json.loads(out)
        self.assertEqual((status["outcome"], status["driver_version"], status["staged_driver_version"]),
                         ("pending-host-reboot", self.v1, self.v2), out)
        self.assertGpuPod(self.ok("pending"), self.sums("root_sums_1"), self.v1)

    def test_after_the_restart_pods_get_the_new_driver(self):
        self.assertGpuPod(self.ok("restarted"), self.sums("root_sums_2"), self.v2)

    def test_cdi_disabled_the_pod_sees_no_gpu_and_verify_says_why(self):
        self.assertEqual(self.ok("cdi-off-restart")[0], 0, self.ok("cdi-off-restart")[1])
        report = self.ok("cdi-off")
        self.assertNotIn("error", report, report)
        self.assertEqual(parse(report)["nodes"], [], report["out"])
        # The premise of every GPU case: this pod fails the assertion the GPU pods pass.
        with self.assertRaises(AssertionError):
            self.assertGpuPod(report, self.sums("root_sums_2"), self.v2)
        rc, out = self.ok("cdi-off-verify")
        self.assertEqual(rc, 1, out)
        v = json.loads(out)
        self.assertIn("containerd", v, out)
        self.assertIs(v["containerd"].get("cdi_enabled"), False, out)
        problems = [p for p in v.get("problems", []) if p.get("path") == "/etc/containerd/config.toml"]
        self.assertTrue(problems, f"no problem names /etc/containerd/config.toml: {out}")
        self.assertTrue(any("enable_cdi" in p.get("message", "") for p in problems), out)

    def test_a_library_removed_from_the_root_fails_the_pod(self):
        self.assertEqual(self.ok("cdi-on-restart")[0], 0, self.ok("cdi-on-restart")[1])
        self.assertEqual(self.ok("removed")[0], 0, self.ok("removed")[1])
        report = self.ok("premise")
        with self.assertRaises(AssertionError, msg="a pod passed with libnvidia-ml removed from the root"):
            self.assertGpuPod(report, self.sums("root_sums_2"), self.v2)
        self.assertIn("error", report, report)
        self.assertIn(f"libnvidia-ml.so.{self.v2}", report["error"])


if __name__ == "__main__":
    main()
