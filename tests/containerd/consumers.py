"""The GPU consumers follow a host change by themselves (unbounded-nvidia-consumers): in the booted
machine, a stand-in device plugin pod and an unrelated pod run under containerd, with the test playing
kubelet's restart policy; the host changes the driver (module and userspace) and then the GPU set, and
nothing is run in the machine but what the host's reconcile loop runs (a refresh after a GPU change,
which no unit can watch).

The stand-in does what the NVIDIA device plugin does in its cdi-cri mode that matters here: at its start
it writes its own CDI spec into /var/run/cdi from the driver root it mounts (the version it finds
there), and it exits on SIGTERM."""

import threading
import time
import uuid

import probe_image
import sequences
from pods import parse
from unbounded_tests.harness import ARCH

PLUGIN_LABELS = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}
PLUGIN_SPEC = "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json"
CONTAINER = "nvidia-device-plugin-ctr"
# The device plugin's part: the spec for the root's version (libcuda's and libnvidia-ml's files, the
# control node, GPU 0), then wait for SIGTERM.
PLUGIN_SCRIPT = """set -e
for f in /driver-root/lib/@ARCH@/libcuda.so.*.*.*; do v=${f##*/libcuda.so.}; done
lib=/run/nvidia/driver/lib/@ARCH@
m() { echo "{\\"hostPath\\": \\"$lib/$1.$v\\", \\"containerPath\\": \\"/lib/@ARCH@/$1.$v\\", \\"options\\": [\\"ro\\", \\"nosuid\\", \\"nodev\\", \\"rbind\\", \\"rprivate\\"]}"; }
cat > @SPEC@ <<END_OF_SPEC
{"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu",
 "devices": [{"name": "GPU-0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"}]}}],
 "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"], "deviceNodes": [{"path": "/dev/nvidiactl", "hostPath": "/dev/nvidiactl"}],
  "mounts": [$(m libcuda.so), $(m libnvidia-ml.so)]}}
END_OF_SPEC
trap 'exit 0' TERM
while :; do sleep 1 & wait $!; done
""".replace("@ARCH@", ARCH).replace("@SPEC@", PLUGIN_SPEC)
SLEEPER = "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"


class Kubelet(threading.Thread):
    """kubelet's part for the pods it runs: a container that is not running is created and started
    again (restart policy Always), as its attempt + 1. Counts the restarts by pod."""

    def __init__(self, node):
        super().__init__(daemon=True)
        self.node, self.pb = node, node.pb
        self.pods = {}  # name -> {sandbox, config, command, mounts, container, attempt, restarts}
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.errors = []

    def run_pod(self, name, labels, command, container="main", mounts=()):
        pb = self.pb
        uid = uuid.uuid4().hex
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="kube-system", attempt=0), labels=labels,
            log_directory=f"/var/log/pods/kube-system_{name}_{uid}",
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=f"kubepods-besteffort-pod{uid}.slice",
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=pb.NamespaceOption(network=pb.NODE))))
        sandbox = self.node.cri.RunPodSandbox(pb.RunPodSandboxRequest(config=config)).pod_sandbox_id
        pod = dict(name=name, sandbox=sandbox, config=config, command=command, container_name=container, mounts=mounts,
                   attempt=0, restarts=0)
        pod["container"] = self._start(pod)
        with self.lock:
            self.pods[name] = pod
        return pod

    def _start(self, pod):
        pb = self.pb
        cconfig = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=pod["container_name"], attempt=pod["attempt"]),
            image=pb.ImageSpec(image=probe_image.NAME), command=["/bin/sh", "-c", pod["command"]],
            log_path=f"{pod['container_name']}-{pod['attempt']}.log", linux=pb.LinuxContainerConfig(),
            mounts=[pb.Mount(container_path=c, host_path=h, readonly=ro) for c, h, ro in pod["mounts"]])
        cid = self.node.cri.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod["sandbox"], sandbox_config=pod["config"], config=cconfig)).container_id
        self.node.cri.StartContainer(pb.StartContainerRequest(container_id=cid))
        return cid

    def _running(self, pod):
        pb = self.pb
        r = self.node.cri.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(pod_sandbox_id=pod["sandbox"])))
        return [c.id for c in r.containers if c.state == pb.CONTAINER_RUNNING]

    def run(self):
        while not self.halt.wait(0.5):
            with self.lock:
                pods = list(self.pods.values())
            for pod in pods:
                try:
                    if not self._running(pod):
                        pod["attempt"] += 1
                        pod["container"] = self._start(pod)
                        pod["restarts"] += 1
                except Exception as e:  # noqa: B902 -- reported with what the steps saw; the thread goes on
                    self.errors.append(f"{pod['name']}: {e}")

    def remove_all(self):
        self.halt.set()
        self.join(10)
        for pod in self.pods.values():
            self.node.remove(pod["sandbox"])


def wait_for(node, script, seconds):
    rc, _ = node.sh(f"for i in $(seq {seconds * 4}); do {script} && exit 0; sleep 0.25; done; exit 1", timeout=seconds + 30)
    return rc == 0


def follow_steps(case, node, staging, versions, staged):
    """The scenario, from a ready machine at `staged` with every GPU; returns what was seen, and leaves
    the machine ready at `staged` again with its pods removed."""
    seen = {}
    day = sequences.BootedDay(case, node, staging, versions, staged)
    kubelet = Kubelet(node)
    plugin = kubelet.run_pod("nvdp-nvidia-device-plugin-x7k2p", PLUGIN_LABELS, PLUGIN_SCRIPT, container=CONTAINER,
                             mounts=(("/driver-root", "/run/nvidia/driver", True), ("/var/run/cdi", "/var/run/cdi", False)))
    other = kubelet.run_pod("web-5d8f7", {"app": "web"}, SLEEPER)
    seen["other-first"] = other["container"]
    kubelet.start()
    seen["plugin-first"] = wait_for(node, f"grep -q libcuda.so.{staged} {PLUGIN_SPEC}", 60)
    new = day.other(staged)

    def after(label):
        t0 = time.monotonic()
        seen[f"{label}-spec"] = wait_for(node, f"grep -q libcuda.so.{new} {PLUGIN_SPEC}", 180)
        seen[f"{label}-seconds"] = time.monotonic() - t0
        day.settle()  # the consumers' unit done
        seen[f"{label}-verify"] = node.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        seen[f"{label}-restarts"] = plugin["restarts"]
        seen[f"{label}-other"] = (other["container"], other["restarts"])
        seen[f"{label}-record"] = node.sh("cat /run/unbounded-nvidia/consumers.json")[1]
        seen[f"{label}-pod"] = node.probe(f"{label}-pod", new, cdi=["nvidia.com/gpu=all"])

    # The host loads the new module and stages its userspace: the path unit's refresh swaps the root.
    seen["upgrade"] = [day.step_module(), day.step_stage()]
    after("upgrade")
    # A GPU falls off: the host's reconcile loop starts a refresh (no unit watches /proc).
    seen["gpu"] = [day.step_gpu(1), day.step_refresh()]
    after("gpu")
    kubelet.remove_all()
    seen["kubelet-errors"] = kubelet.errors
    node.sh(f"rm -f {PLUGIN_SPEC}")  # the plugin's file, which would name this driver after the reset
    seen["reset"] = day.reset()
    return seen


def check(case, seen, new):
    """The assertions, for either tier's TestCase: the plugin restarted once per change and back on the
    new driver's files, the unrelated pod untouched, verify ready, a new GPU pod on the new driver."""
    case.assertTrue(seen["plugin-first"], "the stand-in device plugin wrote no spec at its start")
    case.assertEqual(seen["kubelet-errors"], [])
    for label, restarts in (("upgrade", 1), ("gpu", 2)):
        record = seen[f"{label}-record"]
        case.assertTrue(seen[f"{label}-spec"], f"{label}: the plugin's spec never named driver {new}: {record}")
        case.assertEqual(seen[f"{label}-restarts"], restarts,
                         f"{label}: the plugin's container was restarted {seen[f'{label}-restarts']} times in all: {record}")
        case.assertEqual(seen[f"{label}-other"], (seen["other-first"], 0), f"{label}: the unrelated pod's container was touched")
        rc, out = seen[f"{label}-verify"]
        case.assertEqual(rc, 0, f"{label}: verify not ready: {out[-1500:]}")
        report = seen[f"{label}-pod"]
        case.assertNotIn("error", report, report)
        sums = parse(report)["sums"]  # the files the pod could read, by path
        case.assertTrue(any(p.endswith(f"/libcuda.so.{new}") for p in sums), f"{label}: the new pod has no libcuda.so.{new}: {report}")
