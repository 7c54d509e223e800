"""What both containerd tiers share (test_containerd.py on trixie's 1.7, test_containerd2.py on sid's
2.x): the GPU machine they boot (Debian's real 535 driver bound as staging, fake /dev/nvidia* nodes,
a fake module version, /proc/devices and GPU information files), the command loop the host drives in
the booted machine, the kubelet stand-in's pod calls, the probe a GPU pod runs and the assertion of
what it saw. Only the containerd configuration and the scenarios differ between the tiers."""

import hashlib
import json
import os
import shutil
import time
import uuid

from unbounded_tests import cri
import probe_image
from unbounded_tests import debian_hosts as dh
from unbounded_tests.harness import ARCH, make_chardev, proc_version_text
from unbounded_tests.image import IMAGES, SOURCE, base_image
from unbounded_tests.machine import Machine

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("BUILD_ROOT", os.path.join(SOURCE, "build"))

LIB = "/usr/lib/x86_64-linux-gnu"
UUIDS = [f"GPU-{i:08x}-8e4b-4d0e-9c1a-2b7e6d5f4a10" for i in range(2)]
# The host recipe's binds (as the podman tier's), one staging slot each.
BINDS = [LIB, "/usr/lib/nvidia/current", "/usr/share/glvnd/egl_vendor.d", "/usr/share/vulkan", "/etc/OpenCL/vendors"]
NODES = [("nvidiactl", 195, 255), ("nvidia-modeset", 195, 254), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1),
         ("nvidia0", 195, 0), ("nvidia1", 195, 1)]
ALL_NODES = sorted(f"/dev/{n}" for n, _, _ in NODES)
REQUIRED = ("systemd-nspawn", "mkosi", "debootstrap", "unshare", "journalctl", "protoc", "readelf", "dpkg-deb")

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
# its own loader resolves, their checksums (PROBE_SUMS: of version @V@), and nvidia-smi's complaint.
PROBE_DEVICES = """
for n in /dev/nvidia*; do [ -e "$n" ] && echo "NODE $n"; done
for n in /dev/nvidia*; do [ -c "$n" ] && { (exec 3<"$n") 2>/tmp/err; echo "OPEN $n $(cat /tmp/err)"; }; done
mknod /tmp/denied c 195 77 && { (exec 3</tmp/denied) 2>/tmp/err; echo "DENIED $(cat /tmp/err)"; }
/usr/lib64/ld-linux-x86-64.so.2 --preload 'libcuda.so.1 libnvidia-ml.so.1' --list /usr/bin/true 2>&1 | while read -r l; do echo "LD $l"; done
"""
PROBE_SUMS = """sha256sum /usr/lib/@ARCH@/libcuda.so.@V@ /usr/lib/@ARCH@/libnvidia-ml.so.@V@ 2>&1 | while read -r l; do echo "SUM $l"; done
"""
PROBE_SMI = """nvidia-smi > /tmp/smi 2>&1; echo "SMI rc=$? $(cat /tmp/smi)"
true
"""
PROBE = PROBE_DEVICES + PROBE_SUMS + PROBE_SMI

RELOAD_PROBE = 'for n in /dev/nvidia0 /dev/nvidiactl; do (exec 3<"$n") 2>/tmp/err; echo "OPEN $n $(cat /tmp/err)"; done'

# systemd-analyze runs no generators: the generator's directories go into its unit path.
ANALYZE = ("cd /; SYSTEMD_UNIT_PATH=/etc/systemd/system:/run/systemd/generator.early:"
           "/run/systemd/generator:/usr/lib/systemd/system:/run/systemd/generator.late "
           "systemd-analyze verify --man=no unbounded-nvidia-setup.service "
           "unbounded-nvidia-refresh.service unbounded-nvidia-refresh.path unbounded-nvidia-refresh.timer "
           "unbounded-nvidia-license-reload.service unbounded-nvidia-license-reload.path "
           "unbounded-nvidia-license-reload.timer unbounded-nvidia-license-install.service containerd.service 2>&1")


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


def driver_version(host):
    """The driver version a Debian host tree installs (its libcuda.so.<v>)."""
    return [n for n in os.listdir(host.p(f"{LIB}/nvidia/current"))
            if n.startswith("libcuda.so.") and n.count(".") == 4][0][len("libcuda.so."):]


def install_hosts(tmp, *releases):
    """Debian's real NVIDIA packages of each release ("bookworm-535", ...) installed into host trees
    under `tmp`, as debian_hosts.py lays them out; returns [(tree, version)]."""
    hosts = []
    for release in releases:
        tree = dh.HostTree(os.path.join(tmp, f"host-{release}"))
        dh.install_debian(tree, release)
        hosts.append((tree, driver_version(tree)))
    return hosts


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


def prepare_gpu_node(m, host, version, base, config_toml):
    """Makes machine `m` (booted on the unified hierarchy, bpf() allowed) a GPU node of `host`'s driver:
    each of BINDS copied to a staging directory bound read-only at /run/host-nvidia/<n>, the nodes,
    the module at `version`, /proc/devices and two GPUs' information files; containerd configured by
    `config_toml`, its runc wrapper, the probe image made from `base`, and /run/containerd a host
    directory (the CRI socket the test connects to). Returns the staging directories."""
    m.enforce_device_rules()
    staging = []
    for n, path in enumerate(BINDS):
        d = m.host(f"staging/{n}")
        shutil.copytree(host.p(path), d, symlinks=True) if os.path.isdir(host.p(path)) else os.makedirs(d)
        staging.append(d)
        m.bind(d, f"/run/host-nvidia/{n}", read_only=True)
    for name, major, minor in NODES:
        node = m.host(f"dev/{name}")
        make_chardev(node, major, minor)
        m.bind(node, f"/dev/{name}")
    m.fake_module(proc_version_text(version))
    fake_proc_devices(m)
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
    m.write("/etc/containerd/config.toml", config_toml)
    os.makedirs(m.p("/usr/local/libexec/unbounded-test"), exist_ok=True)
    shutil.copy(os.path.join(HERE, "runc-no-cpu-controller"), m.p("/usr/local/libexec/unbounded-test/runc"))
    os.makedirs(m.p("/var/lib/unbounded-test"), exist_ok=True)
    probe_image.build(base, m.p("/var/lib/unbounded-test/probe.tar"))
    run = m.host("containerd-run")
    os.makedirs(run, exist_ok=True)
    m.bind(run, "/run/containerd")
    return staging


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
        try:
            container = self.cri.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sandbox, sandbox_config=config,
                config=pb.ContainerConfig(
                    metadata=pb.ContainerMetadata(name="probe"), image=pb.ImageSpec(image=probe_image.NAME),
                    command=["/usr/bin/sleep", "3600"], log_path="probe.log", annotations=annotations or {},
                    CDI_devices=[pb.CDIDevice(name=d) for d in cdi], linux=pb.LinuxContainerConfig()))).container_id
            self.cri.StartContainer(pb.StartContainerRequest(container_id=container))
        except self.cri.grpc.RpcError:
            # Removed, as kubelet removes a pod it gave up on: a refused pod's sandbox left running made
            # each boot that had one about 90 s longer before the machine was down (the 1.7 tier's
            # boot 1 98 s, now 8 s; the 2.x boot 96 s, now 6 s).
            try:
                self.remove(sandbox)
            except self.cri.grpc.RpcError:
                pass  # the refusal is what the caller wants to see
            raise
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


def run_session(m, pb, steps):
    """One boot of `m`: `steps(node)` runs as the host's turn while the machine runs its command loop.
    An exception in it ends the turn (so the machine powers off) and is raised after the boot, with
    the end of containerd's journal."""
    node = Node(m, pb)
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
    m.boot(AGENT, host_turns=[turn], timeout=900)
    if failure:
        journal = "\n".join(msg for _, _, msg in m.messages("_SYSTEMD_UNIT=containerd.service"))
        # A newer systemd's journal files (sid's) may be more than the host's journalctl can read.
        journal = journal or "(nothing the host's journalctl could read)"
        raise RuntimeError(f"a step failed in the booted machine; containerd's journal ends:\n{journal[-3000:]}\n"
                           f"console:\n{m.console[-2000:]}") from failure[0]


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


# A leftover of nvidia-cdi-refresh: our kind, in the directory that wins, `all` being GPU 1 alone.
SHADOW = "/var/run/cdi/nvidia.yaml"
SHADOW_SPEC = """cdiVersion: {cdi_version}
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
    - path: /dev/nvidiactl
containerEdits:
  env:
  - SHADOWED_BY=nvidia-cdi-refresh
"""


def gpu_pod_steps(node, seen, version, sums_key):
    """The pods both tiers start on their first boot, recorded in `seen`: the driver root's sums
    (as `sums_key`), then pods asking for every GPU through the CDI field and through the annotation,
    for one GPU by index and by UUID, for a device no spec has, and for none."""
    seen[sums_key] = node.sh(f"sha256sum /run/nvidia/driver/lib/{ARCH}/libcuda.so.{version} "
                             f"/run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{version}")
    seen["field-all"] = node.probe("field-all", version, cdi=["nvidia.com/gpu=all"])
    seen["annotation-all"] = node.probe("annotation-all", version, annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"})
    seen["index-0"] = node.probe("index-0", version, cdi=["nvidia.com/gpu=0"])
    seen["uuid-1"] = node.probe("uuid-1", version, cdi=[f"nvidia.com/gpu={UUIDS[1]}"])
    seen["unknown"] = node.probe("unknown", version, cdi=["nvidia.com/gpu=7"])
    seen["none"] = node.probe("none", version)


def leftover_spec_steps(node, seen, version, cdi_version):
    """The leftover spec at `cdi_version` in the booted machine: what containerd gives a pod asking for
    `all`, its environment, what verify says, then the spec removed (recorded in `seen` as shadow-*).
    /var/run is the machine's own tmpfs /run: written from inside."""
    seen["shadow-write"] = node.sh(f"mkdir -p {os.path.dirname(SHADOW)} && cat > {SHADOW} <<'EOF'\n"
                                   f"{SHADOW_SPEC.format(cdi_version=cdi_version)}EOF")
    seen["shadow"] = node.probe("shadow", version, cdi=["nvidia.com/gpu=all"])
    sandbox, container = node.pod("shadow-env", cdi=["nvidia.com/gpu=all"])
    try:
        seen["shadow-env"] = node.exec(container, "env")
    finally:
        node.remove(sandbox)
    seen["shadow-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
    seen["shadow-remove"] = node.sh(f"rm {SHADOW}")


class PodAssertions:
    """The assertions on what a pod saw, for a TestCase class whose setUpClass filled `seen` and set
    `hosts`: {driver version: the host tree it came from}."""

    def ok(self, key):
        self.assertIn(key, self.seen, f"the boot did not get as far as {key}")
        return self.seen[key]

    def sums(self, key):
        rc, out = self.ok(key)
        self.assertEqual(rc, 0, out)
        return out

    def verify_json(self, key):
        rc, out = self.ok(key)
        try:
            return rc, json.loads(out)
        except ValueError:
            self.fail(f"verify --json printed no JSON ({rc}): {out}")

    def assertLeftoverWins(self):
        """What leftover_spec_steps() saw: containerd gave the pod asking for `all` the leftover's one
        GPU and its environment, and verify was not ready, naming the file that wins."""
        self.assertEqual(self.ok("shadow-write")[0], 0, self.ok("shadow-write")[1])
        report = self.ok("shadow")
        self.assertNotIn("error", report, report)
        self.assertEqual(parse(report)["nodes"], ["/dev/nvidia1", "/dev/nvidiactl"], report["out"])
        rc, env = self.ok("shadow-env")
        self.assertIn("SHADOWED_BY=nvidia-cdi-refresh", env)
        rc, v = self.verify_json("shadow-verify")
        self.assertEqual(rc, 1, v)
        wins = [s for s in v["cdi_shadowing"] if s["file"] in (SHADOW, "/run/cdi/nvidia.yaml")]
        self.assertEqual([s["directory"] for s in wins], ["later"], v["cdi_shadowing"])
        self.assertTrue(any(p["path"] in (SHADOW, "/run/cdi/nvidia.yaml") and "wins" in p["message"] for p in v["problems"]), v["problems"])
        self.assertEqual(self.ok("shadow-remove")[0], 0, self.ok("shadow-remove")[1])
        return v

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
            host = self.hosts[version]
            self.assertEqual(want[f"/usr/lib/{ARCH}/{lib}.so.{version}"], sha256(host.p(f"{LIB}/nvidia/current/{lib}.so.{version}")))
        self.assertIn("couldn't communicate with the NVIDIA driver", p["smi"])
        self.assertNotIn("couldn't find libnvidia-ml.so", p["smi"])

    def assertNoGpuPod(self, report):
        """A pod that asked for no device (or whose containerd does not apply CDI): no GPU node, the
        device rules enforced, no libcuda for its loader."""
        self.assertNotIn("error", report, report)
        p = parse(report)
        self.assertEqual(p["nodes"], [], p["out"])
        self.assertIn("Operation not permitted", "".join(p["denied"]), p["out"])
        self.assertNotIn("libcuda.so.1 =>", p["ld"])


class GpuNodeTier(PodAssertions):
    """What both tiers' TestCase classes share: the start of setUpClass (prerequisites, the CRI client,
    Debian's real driver trees, the machine from its image), the clean-up, and the cases whose
    assertions do not depend on containerd's version. A tier sets SUMS_KEY, the key under which its
    gpu_pod_steps() recorded the first driver root's sums."""

    SUMS_KEY = None

    @classmethod
    def start(cls, name, label, releases, image):
        """Fails (never skips) without the tier's prerequisites; installs each release's driver into a host
        tree (cls.hosts: {version: tree}) and makes cls.m, a machine of `image` that keeps its own
        containerd. Returns ([(tree, version)] in the order of `releases`, the base image's path)."""
        missing = missing_prerequisites()
        if missing:  # a failure, not a skip: CI must not go green without this tier
            raise RuntimeError(f"the {label} tier needs {', '.join(missing)} (make check installs CONTAINERD_DEPS; run as root)")
        cls.tmp = os.path.join(BUILD, f"{name}-tier")
        shutil.rmtree(cls.tmp, ignore_errors=True)
        os.makedirs(cls.tmp)
        cls.pb = cri.generate(BUILD)
        hosts = install_hosts(cls.tmp, *releases)
        cls.hosts = {version: tree for tree, version in hosts}
        cls.seen = {}
        base = base_image(*IMAGES[image])
        owner = type("ClassCleanups", (), {"addCleanup": staticmethod(cls.addClassCleanup)})()
        cls.m = Machine(owner, name, base=base, real_containerd=True)
        return hosts, base

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    def test_containerd_requires_and_follows_setup(self):
        rc, out = self.ok("show")
        props = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
        self.assertIn("unbounded-nvidia-setup.service", props["Requires"].split(), out)
        self.assertIn("unbounded-nvidia-setup.service", props["After"].split(), out)
        self.assertEqual(props["ActiveState"], "active", out)

    # The pods of gpu_pod_steps(), on the first driver (`v1`), whose root's sums are SUMS_KEY.
    def test_pod_through_the_cdi_devices_field(self):
        self.assertGpuPod(self.ok("field-all"), self.sums(self.SUMS_KEY), self.v1)

    def test_pod_through_the_cdi_annotation(self):
        self.assertGpuPod(self.ok("annotation-all"), self.sums(self.SUMS_KEY), self.v1)

    def test_pod_by_index_gets_only_that_gpu(self):
        self.assertGpuPod(self.ok("index-0"), self.sums(self.SUMS_KEY), self.v1,
                          nodes=sorted(set(ALL_NODES) - {"/dev/nvidia1"}))

    def test_pod_by_uuid_gets_only_that_gpu(self):
        self.assertGpuPod(self.ok("uuid-1"), self.sums(self.SUMS_KEY), self.v1,
                          nodes=sorted(set(ALL_NODES) - {"/dev/nvidia0"}))

    def test_an_unknown_device_is_refused_at_create(self):
        report = self.ok("unknown")
        self.assertIn("error", report, "a pod asking for nvidia.com/gpu=7 was created")
        self.assertIn("nvidia.com/gpu=7", report["error"])

    def test_a_pod_without_devices_sees_no_gpu(self):
        self.assertNoGpuPod(self.ok("none"))
