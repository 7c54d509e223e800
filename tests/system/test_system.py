#!/usr/bin/env python3
"""System tests: the seed scenarios on a real systemd 252, in a mkosi-built Debian machine booted with
systemd-nspawn. Each scenario is checked from the machine's journal and files after it powered off."""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import unittest

from unbounded_tests import npd
from unbounded_tests.harness import ARCH, V1, V2, MachineRoot, main, make_chardev, proc_version_text
from unbounded_tests.machine import BUILD, Machine

REQUIRED = ("systemd-nspawn", "mkosi", "unshare", "debootstrap", "journalctl")


def missing_prerequisites():
    missing = [t for t in REQUIRED if not shutil.which(t)]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


class SystemCase(unittest.TestCase):
    def setUp(self):
        # A missing prerequisite is a failure, not a skip: CI must not go green without this tier.
        missing = missing_prerequisites()
        self.assertEqual(missing, [], f"system tests need {', '.join(missing)} (make check installs the packages; run as root)")

    def gpu_machine(self, name, version=V1, gpus=2, staging=True, padding=None):
        """A machine whose host staged `version` at /run/host-nvidia/{0,1,2} and bound GPU nodes;
        `padding` makes libraries as large as a real driver's ({"libcuda": MiB, ...})."""
        m = Machine(self, name)
        if staging:
            self.stage(m, version, padding=padding)
        devs = [("nvidiactl", 195, 255), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1)] + \
               [(f"nvidia{i}", 195, i) for i in range(gpus)]
        for dev, major, minor in devs:
            node = m.host(f"dev/{dev}")
            make_chardev(node, major, minor)
            m.bind(node, f"/dev/{dev}")
        return m

    def stage(self, m, version, broken=False, slot="staging", padding=None):
        root = MachineRoot(tmp=m.host(f"{slot}-{version}"))
        root.stage_all(version)
        for lib, mb in (padding or {}).items():  # trailing bytes: the ELF still loads
            with open(root.p(f"/run/host-nvidia/0/{lib}.so.{version}"), "ab") as f:
                f.write(os.urandom(mb << 20))
        if broken:  # a host mid-upgrade: libnvidia-ml of another version than libcuda
            d = root.p("/run/host-nvidia/0")
            os.rename(os.path.join(d, f"libnvidia-ml.so.{version}"), os.path.join(d, f"libnvidia-ml.so.{V2}"))
        m.staging_root = root
        m.binds = [b for b in m.binds if "/run/host-nvidia/" not in b]
        for n in range(3):
            m.bind(root.p(f"/run/host-nvidia/{n}"), f"/run/host-nvidia/{n}", read_only=True)

    def assertReadyFor(self, m, version, who="containerd", verify=True):
        """What `who` found when it started; `verify`: and what verify said once the machine was up
        (the scenario's start: machine.py)."""
        self.assertEqual(m.read(f"/var/lib/standin/{who}/setup-state").strip(), "active",
                         f"{who} started before unbounded-nvidia-setup was done")
        if verify:
            self.assertEqual(m.read("/var/lib/standin/containerd/verify.rc").strip(), "0",
                             m.read("/var/lib/standin/containerd/verify.err", ""))
            self.assertTrue(m.json("/var/lib/standin/containerd/verify.json")["ready"])
        self.assertEqual(m.read("/var/lib/standin/containerd/nvidia-smi.txt").strip(), f"Driver Version: {version}")
        spec = m.read("/var/lib/standin/containerd/spec.yaml")
        self.assertIn(f"libcuda.so.{version}", spec)
        root = m.read("/var/lib/standin/containerd/root.txt")
        self.assertIn(f"f /run/nvidia/driver/lib/{ARCH}/libcuda.so.{version} -> ", root)
        self.assertIn(f"f /run/nvidia/driver/lib/{ARCH}/libnvidia-ml.so.{version} -> ", root)
        return spec, root

    def assertOrdered(self, m, first, then, boot=-1):
        """In the given boot, `first` finished before `then` began (journal, monotonic clock)."""
        entries = m.messages("_PID=1")
        boots = []
        for _, b, _ in entries:
            if b not in boots:
                boots.append(b)
        msgs = [(t, msg) for t, b, msg in entries if b == boots[boot]]
        done = [t for t, msg in msgs if msg.startswith("Finished " + first)]
        # "Starting" for a service with a start phase, "Started" alone for Type=simple (kubeadm's kubelet)
        start = [t for t, msg in msgs if msg.startswith("Starting " + then) or msg.startswith("Started " + then)]
        self.assertTrue(done, f"no 'Finished {first}' in the journal")
        self.assertTrue(start, f"no 'Starting {then}' in the journal")
        self.assertLess(done[0], start[0], f"{then} started before {first} finished")


class TestBoot(SystemCase):
    def test_first_boot(self):
        scenario = """
for u in unbounded-nvidia-setup.service unbounded-nvidia-refresh.service; do
	systemd-analyze security --no-pager $u 2>&1 | tail -1 >> $out/security
	systemctl show -p ProtectSystem -p CapabilityBoundingSet -p RestrictSUIDSGID $u >> $out/sandbox
done
# The host's two ways to ask (README): on a pty, as machinectl shell gives one (script(1) makes it:
# these machines are not registered with machined), and as a transient unit with its stdout piped.
script -qec "/usr/bin/unbounded-nvidia-setup verify --json" /dev/null > $out/pty-verify.json 2>&1
systemd-run --wait --pipe --quiet /usr/bin/unbounded-nvidia-setup verify --json > $out/run-verify.json 2> $out/run-verify.err
"""
        # A driver as large as Debian's 535 (bench/setup_bench.py's 155 MiB tree).
        m = self.gpu_machine("first-boot", padding={"libcuda": 70, "libnvidia-glcore": 40, "libnvidia-eglcore": 20,
                                                    "libnvidia-ptxjitcompiler": 25})
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))  # as prometheus-node-exporter leaves it
        m.boot(scenario)
        # Issue 15: the sandboxed setup wrote its metrics for the textfile collector.
        prom = m.read("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")
        self.assertIn("unbounded_nvidia_ready 1\n", prom)
        self.assertIn('unbounded_nvidia_outcome_info{command="setup",outcome="ready"} 1\n', prom)
        self.assertReadyFor(m, V1)
        # Issue 18: what the boot path pays, from the journal's monotonic clock: setup starting to
        # containerd starting (the copy and everything around it), with the driver's size.
        msgs = [(t, msg) for t, _, msg in m.messages("_PID=1")]
        start = min(t for t, msg in msgs if msg.startswith("Starting unbounded-nvidia-setup.service"))
        ready = min(t for t, msg in msgs if msg.startswith("Starting containerd.service"))
        size = m.json("/var/lib/standin/containerd/status.json")["driver_root_ram_bytes"]
        print(f"# boot delay: setup start to containerd start {(ready - start) / 1000:.1f} ms, "
              f"driver root {size / 2**20:.1f} MiB (tmpfs)", flush=True)
        self.assertGreater(ready, start)
        # Issue 17: setup did its whole job in its sandbox, as systemd loaded it in the machine.
        for line in m.read("/var/lib/standin/security").splitlines():
            self.assertRegex(line, r"Overall exposure level for unbounded-nvidia-(setup|refresh).service: [0-2]\.\d OK")
        self.assertEqual(sorted(m.read("/var/lib/standin/sandbox").split()),
                         sorted(["ProtectSystem=strict", "CapabilityBoundingSet=", "RestrictSUIDSGID=yes"] * 2))
        self.assertEqual(m.read("/var/lib/standin/kubelet/setup-state").strip(), "active")
        # Issue 43, item 9: the host's commands get the JSON object and nothing else.
        for name in ("pty-verify.json", "run-verify.json"):
            text = m.read(f"/var/lib/standin/{name}").replace("\r\n", "\n")
            self.assertTrue(json.loads(text)["ready"], text)
        self.assertOrdered(m, "unbounded-nvidia-setup.service", "containerd.service")
        self.assertOrdered(m, "unbounded-nvidia-setup.service", "kubelet.service")
        status = m.json("/var/lib/standin/containerd/status.json")
        self.assertEqual(status["outcome"], "ready")
        self.assertEqual(status["gpus"], 2)
        self.assertEqual(status["driver_root_fs"], "tmpfs")
        # The journal has the structured outcome, and systemctl status the STATUS= line.
        ready = m.journal("MESSAGE_ID=a22c5f0c72d0426dbccb8b3dbb5eb396")
        self.assertEqual(len(ready), 1)
        self.assertEqual(ready[0]["UNBOUNDED_NVIDIA_DRIVER_VERSION"], V1)

    def test_host_reboot_with_a_new_driver_version(self):
        m = self.gpu_machine("reboot-new-version").boot()
        self.assertReadyFor(m, V1)
        self.stage(m, V2)
        m.boot()
        spec, root = self.assertReadyFor(m, V2)
        self.assertNotIn(V1, spec, "stale path of the old driver in the CDI spec")
        self.assertNotIn(V1, root, "file of the old driver in the driver root")
        self.assertNotIn(V1, m.read("/etc/cdi/nvidia.yaml"))

    def test_plain_machine_restart_and_service_restart(self):
        scenario = """
stat -c %i /etc/cdi/nvidia.yaml > $out/spec-inode
systemctl restart unbounded-nvidia-setup.service
cp /run/unbounded-nvidia/status.json $out/status-after-restart.json
# Requires= propagates the restart to containerd, which comes back once setup is ready again.
wait_for 20 systemctl is-active -q containerd.service
systemctl is-active containerd.service > $out/containerd-after-restart
wait_for 20 systemctl is-active -q kubelet.service
verify_now  # containerd's restart recorded afresh what it found
"""
        m = self.gpu_machine("restart").boot(scenario)
        first_inode = m.read("/var/lib/standin/spec-inode")
        m.boot(scenario)
        self.assertReadyFor(m, V1)
        # After the machine restart /run was new, so the root was rebuilt; the spec was not rewritten.
        self.assertEqual(m.read("/var/lib/standin/spec-inode"), first_inode)
        self.assertFalse(m.json("/var/lib/standin/containerd/status.json")["cdi_spec_written"])
        # A restart of the unit within the boot copies nothing.
        again = m.json("/var/lib/standin/status-after-restart.json")
        self.assertTrue(again["ready"])
        self.assertEqual(again["bytes_copied"], 0)
        self.assertTrue(again["unchanged"])
        self.assertEqual(m.read("/var/lib/standin/containerd-after-restart").strip(), "active")

    def test_non_gpu_machine(self):
        m = Machine(self, "non-gpu").boot()
        self.assertEqual(m.read("/var/lib/standin/containerd/setup-load").strip(), "not-found")
        self.assertTrue(os.path.exists(m.p("/var/lib/standin/kubelet/uptime")), "kubelet did not start")
        self.assertFalse(os.path.exists(m.p("/etc/cdi/nvidia.yaml")))

    def test_a_machine_that_boots_without_its_gpus_keeps_no_spec_of_ours(self):
        """Issue 19: the image ran on a GPU host, then boots on a host without GPUs: the cleanup unit
        removes our spec before containerd starts; another vendor's spec stays."""
        m = self.gpu_machine("lost-gpus").boot()
        self.assertReadyFor(m, V1)
        m.write("/etc/cdi/other-vendor.yaml", "---\ncdiVersion: 0.5.0\nkind: example.com/device\n")
        m.binds = []  # no staging mounts, no device nodes
        m.boot()
        self.assertEqual(m.read("/var/lib/standin/containerd/setup-load").strip(), "not-found")
        self.assertTrue(os.path.exists(m.p("/var/lib/standin/containerd/uptime")), "containerd did not start")
        self.assertFalse(os.path.exists(m.p("/var/lib/standin/containerd/spec.yaml")), "containerd found our stale spec")
        self.assertFalse(os.path.exists(m.p("/etc/cdi/nvidia.yaml")))
        self.assertTrue(os.path.exists(m.p("/etc/cdi/other-vendor.yaml")))
        self.assertEqual(len(m.journal("MESSAGE_ID=d35cfe781ba94c2293fcd820d99139ae")), 1)
        self.assertOrdered(m, "unbounded-nvidia-cleanup.service", "containerd.service")

    def test_broken_staging_blocks_containerd_with_the_cause_in_status(self):
        scenario = """
systemctl status unbounded-nvidia-setup.service --no-pager -l > $out/setup-status.txt 2>&1
systemctl is-active containerd.service > $out/containerd-active
systemctl is-active kubelet.service > $out/kubelet-active
"""
        m = self.gpu_machine("broken", staging=False)
        self.stage(m, V1, broken=True)
        m.write("/etc/unbounded/nvidia.yaml", "staging_timeout: 3s\n")  # setup --boot's retries, short
        m.boot(scenario)
        self.assertFalse(os.path.exists(m.p("/var/lib/standin/containerd")), "containerd started")
        self.assertNotEqual(m.read("/var/lib/standin/containerd-active").strip(), "active")
        self.assertNotEqual(m.read("/var/lib/standin/kubelet-active").strip(), "active")
        status = m.read("/var/lib/standin/setup-status.txt")
        self.assertIn("failed", status)
        self.assertIn(f'Status: "Failed: Driver version mismatch: /run/host-nvidia/0/libcuda.so.{V1} but '
                      f'/run/host-nvidia/0/libnvidia-ml.so.{V2}"', status)
        failed = m.journal("MESSAGE_ID=59a6c10a04f94e3c9b5851e03f3004f7")
        self.assertEqual(len(failed), 1)


# Issue 43: what the machine is while a failed boot waits for the host, and after.
HEAL_RECORD = """
state() {  # state NAME: containerd's, kubelet's and setup's states and verify, now
	for u in containerd kubelet unbounded-nvidia-setup; do
		echo "$u $(systemctl is-active $u.service)" >> $out/units-$1
	done
	/usr/bin/unbounded-nvidia-setup verify --json > $out/verify-$1.json 2> $out/verify-$1.err
	echo $? > $out/verify-$1.rc
}
"""


class TestHostBinds(SystemCase):
    """Issue 45: a machine booted from the .nspawn file `unbounded-nvidia-host binds` wrote, not the test.
    In the boot's private mount namespace this host is made a GPU host: the fake driver overlaid onto
    its own /usr/lib/<multiarch>, /usr/bin and /usr/lib/firmware (read-only overlays: its own files
    stay), the nodes in a /dev of that namespace, /proc/driver/nvidia and /proc/devices as the module
    makes them, and /etc/systemd on a tmpfs. binds then runs as on any host, without --root, and
    systemd-nspawn --settings=trusted -M reads its file (no machined registers these machines)."""

    def host_binds_machine(self, name, binds_args=()):
        m = Machine(self, name)
        fake = MachineRoot(tmp=m.host("driver"))
        fake.stage_ubuntu(V1, unrelated=False)  # nothing that would shadow this host's own libraries
        fake.stage_bin(V1)
        fake.stage_firmware(V1)
        staged = {0: f"/usr/lib/{ARCH}", 1: "/usr/bin", 2: "/usr/lib/firmware"}
        proc = m.host("proc-driver")
        state = MachineRoot(tmp=proc)
        state.set_proc_version(V1)
        state.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        state.write_proc_devices()
        dev = m.host("dev")
        os.makedirs(dev, exist_ok=True)
        setup = []
        for n, path in staged.items():
            lower = fake.p(f"/run/host-nvidia/{n}")
            setup.append(f"mount -t overlay overlay -o ro,lowerdir={lower}:{path} {path}")
        # This host's /dev in a tmpfs of the namespace: its own nodes (and pts, shm) and the driver's.
        setup += [f"mount -t tmpfs -o mode=755 tmpfs {dev}",
                  f"cp -a /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty /dev/ptmx {dev}/",
                  f"mkdir {dev}/pts {dev}/shm", f"mount --rbind /dev/pts {dev}/pts", f"mount --rbind /dev/shm {dev}/shm",
                  f"mknod -m 666 {dev}/nvidiactl c 195 255", f"mknod -m 666 {dev}/nvidia-uvm c 509 0",
                  f"mknod -m 666 {dev}/nvidia-uvm-tools c 509 1", f"mknod -m 666 {dev}/nvidia0 c 195 0",
                  f"mount --bind {dev} /dev",
                  f"mount -t tmpfs tmpfs /proc/driver", f"cp -a {state.p('/proc/driver/nvidia')} /proc/driver/",
                  f"mount --bind {state.p('/proc/devices')} /proc/devices",
                  # This host's /etc as an overlay of the namespace: binds writes into it, nothing of the
                  # test machine's own /etc changes.
                  f"mkdir -p {m.host('etc-upper')} {m.host('etc-work')}",
                  f"mount -t overlay overlay -o lowerdir=/etc,upperdir={m.host('etc-upper')},workdir={m.host('etc-work')} /etc",
                  "rm -rf /etc/systemd/nspawn /etc/systemd/system/systemd-nspawn@*",
                  f"{os.path.join(BUILD, 'host', 'unbounded-nvidia-host')} binds {name} {' '.join(binds_args)} > {m.host('binds.out')} 2>&1",
                  f"cp /etc/systemd/nspawn/{name}.nspawn {m.host('written.nspawn')}"]
        m.namespace_setup = setup
        m.nspawn_args = ["--settings=trusted", "-M", name]
        return m

    def test_a_machine_booted_from_the_nspawn_file_binds_wrote(self):
        m = self.host_binds_machine("hostbinds")
        m.boot()
        with open(m.host("written.nspawn")) as f:
            written = f.read()
        for line in (f"BindReadOnly=/usr/lib/{ARCH}:/run/host-nvidia/0", "BindReadOnly=/usr/bin:/run/host-nvidia/1",
                     "Bind=/dev/nvidiactl", "Bind=/dev/nvidia0"):
            self.assertIn(line + "\n", written)
        self.assertReadyFor(m, V1)


    def test_the_host_s_settings_reach_the_machine(self):
        """binds --credentials: expected_gpus and the GPU given reach the booted machine through the
        settings directory its .nspawn file binds (systemd-nspawn 252 reads BindReadOnly= there, and no
        nspawn reads a credential from a .nspawn file), and verify --json names where they came from."""
        m = self.host_binds_machine("hostsettings", ["--credentials"])
        # The machine's /proc/driver/nvidia as the host's module makes it (a new /proc in the machine
        # would show this test host's, which has none): the GPU's UUID is what it is checked by.
        host_proc = m.host("proc-driver/proc/driver/nvidia")
        with open(os.path.join(host_proc, "version")) as f:
            m.fake_module(f.read())
        shutil.copytree(os.path.join(host_proc, "gpus"), m.host("proc-driver/nvidia/gpus"))
        # Its bind in the .nspawn file: a --bind on nspawn's command line makes it ignore the file's.
        fake = m.binds.pop()
        m.namespace_setup.insert(-1, f"echo 'BindReadOnly={fake.split('=', 1)[1]}' >> /etc/systemd/nspawn/hostsettings.nspawn")
        m.boot()
        with open(m.host("written.nspawn")) as f:
            self.assertIn("BindReadOnly=/etc/unbounded-nvidia-host/machines/hostsettings:/run/host-nvidia-settings\n", f.read())
        self.assertReadyFor(m, V1)
        settings = m.json("/var/lib/standin/containerd/verify.json")["settings"]
        origin = "host setting unbounded-nvidia.{} (/run/host-nvidia-settings)"
        self.assertEqual(settings["expected_gpus"], {"value": 1, "from": origin.format("expected_gpus")})
        self.assertEqual(settings["gpus"], {"value": ["GPU-00000000-1111-2222-3333-444455556666"], "from": origin.format("gpus")})

    def test_the_host_s_kill_switch_wins_over_a_broken_image_config(self):
        """binds --enabled=no, and a typo in the image's nvidia.yaml: no setup unit at all, containerd
        starts as on a CPU node, and the generator's warning names the ignored error."""
        m = self.host_binds_machine("hostoff", ["--enabled=no"])
        m.write("/etc/unbounded/nvidia.yaml", "stagin_timeout: 30s\n")
        m.boot()
        self.assertEqual(m.read("/var/lib/standin/containerd/setup-load").strip(), "not-found")
        self.assertTrue(os.path.exists(m.p("/var/lib/standin/containerd")))  # started, as on a CPU node
        # (the generator's warning goes to the kernel log, which nspawn hides: test_host.py reads it)


BOOTED_HOST_SCENARIO = r"""
inner=/var/lib/machines/gpu
# The host tool refuses to run in a container; this host is one (nspawn's /run/systemd/container):
# each run gets a mount namespace where that file is empty, as on a host.
host() { unshare -m sh -c 'mount --bind /var/lib/not-a-container /run/systemd/container && exec "$@"' host "$@"; }
in_gpu() { systemd-run -M gpu --wait --pipe -q "$@"; }
up() {  # the GPU machine's kubelet (after containerd, after setup) is active
	systemctl -M gpu is-active -q kubelet.service 2>/dev/null
}
observe() {  # observe N: what the host and the running GPU machine show now
	machinectl show gpu -p Leader --value > $out/leader-$1
	systemctl -M gpu show -p InvocationID --value unbounded-nvidia-setup.service > $out/setup-invocation-$1
	systemctl -M gpu show -p InvocationID --value unbounded-nvidia-refresh.service > $out/refresh-invocation-$1
	systemctl show -p DeviceAllow --value systemd-nspawn@gpu.service > $out/device-allow-$1
	in_gpu /usr/bin/unbounded-nvidia-setup verify --json > $out/verify-$1.json 2> $out/verify-$1.err
	for n in 0 1; do in_gpu sh -c "head -c1 /dev/nvidia$n" > $out/open-nvidia$n-$1 2>&1; done
}
host unbounded-nvidia-host binds gpu --credentials --gpus 0 > $out/binds.out 2>&1; echo $? > $out/binds.rc
cp /etc/systemd/nspawn/gpu.nspawn $out/written.nspawn
systemctl daemon-reload
machinectl start gpu
wait_for 120 up
observe 1
# A GPU reassigned while the machine runs: GPU 1 given, GPU 0 taken back.
host unbounded-nvidia-host --json binds gpu --credentials --gpus 1 --apply > $out/apply.json 2> $out/apply.err; echo $? > $out/apply.rc
observe 2
# Written first without --apply (the operator's first step), applied after: --apply goes by what the
# running machine and its unit have, not by what it wrote itself.
host unbounded-nvidia-host binds gpu --credentials --gpus 0 > $out/back.out 2>&1
host unbounded-nvidia-host --json binds gpu --credentials --gpus 0 --apply > $out/apply-back.json 2> $out/apply-back.err; echo $? > $out/apply-back.rc
observe 3
# The kill switch is the generator's, at boot: --apply names it and writes and changes nothing.
host unbounded-nvidia-host binds gpu --credentials --gpus 1 --enabled=no --apply > $out/off.out 2>&1; echo $? > $out/off.rc
ls /etc/unbounded-nvidia-host/machines/gpu > $out/settings-after-off
host unbounded-nvidia-host binds gpu --credentials --gpus 1 --enabled=no > $out/off-written.out 2>&1
echo 'stagin_timeout: 30s' > $inner/etc/unbounded/nvidia.yaml
rm -rf $inner/var/lib/standin
machinectl poweroff gpu
wait_for 60 sh -c '! machinectl show gpu > /dev/null 2>&1'
machinectl start gpu
wait_for 120 up
systemctl -M gpu show -p LoadState --value unbounded-nvidia-setup.service > $out/setup-load-off
machinectl poweroff gpu
wait_for 60 sh -c '! machinectl show gpu > /dev/null 2>&1'
"""


class TestBootedHost(SystemCase):
    """A host with systemd as PID 1 (this image booted with systemd-nspawn, its systemd-machined and
    systemd-nspawn@.service its own) that runs a GPU machine the way hosts do: `unbounded-nvidia-host
    binds` writes the files, `machinectl start gpu` starts it. The host's driver is the fake one in its
    own /usr/lib/<multiarch>, /usr/bin and /usr/lib/firmware, its GPU nodes bound from this test; the
    host package only (the tool, no generator). The GPU machine is a system-tier image with the project."""

    def machines(self):
        gpu = Machine(self, "bootedgpu")
        for unit in ("multi-user.target.wants/unbounded-test-scenario.service", "unbounded-test-scenario.service"):
            os.unlink(gpu.p(f"/etc/systemd/system/{unit}"))  # (a first boot's preset would enable it again)
        host = Machine(self, "bootedhost", installed=False)
        state = MachineRoot(tmp=host.host("state"))
        state.set_proc_version(V1)
        uuids = ["GPU-00000000-1111-2222-3333-444455556666", "GPU-11111111-2222-3333-4444-555566667777"]
        for minor, (bus, uuid) in enumerate(zip(("0000:18:00.0", "0000:19:00.0"), uuids)):
            state.add_gpu(minor, bus, uuid)
        # This host's /proc/devices with the module's majors added: its systemd resolves char-pts and
        # the other classes of DeviceAllow= there.
        with open("/proc/devices") as f:
            real = f.read()
        state.write_proc_devices()
        with open(state.p("/proc/devices")) as f:
            nvidia = [line for line in f.read().split("\n\n")[0].splitlines() if "nvidia" in line]
        with open(state.p("/proc/devices"), "w") as f:
            f.write(real.replace("Character devices:\n", "Character devices:\n" + "".join(f"{line}\n" for line in nvidia), 1))
        gpu.fake_module(proc_version_text(V1))
        gpu.binds.clear()  # the GPU machine's binds are the host's .nspawn file's, nothing of the test's
        fake = MachineRoot(tmp=host.host("driver"))
        fake.stage_ubuntu(V1, unrelated=False)
        fake.stage_bin(V1)
        fake.stage_firmware(V1)
        for n, path in {0: f"/usr/lib/{ARCH}", 1: "/usr/bin", 2: "/usr/lib/firmware"}.items():
            os.makedirs(host.p(path), exist_ok=True)
            subprocess.run(["cp", "-a", fake.p(f"/run/host-nvidia/{n}") + "/.", host.p(path)], check=True)
        shutil.copy(os.path.join(BUILD, "host", "unbounded-nvidia-host"), host.p("/usr/bin/unbounded-nvidia-host"))
        host.write("/var/lib/not-a-container", "")
        # The operator's own lines: no user namespace and no veth (machined binds into no user
        # namespace on 252; this test host has no network to give), the fake module's /proc/driver.
        host.write("/etc/systemd/nspawn/gpu.nspawn", "[Exec]\nPrivateUsers=no\n\n[Files]\nBindReadOnly=/var/lib/fake-proc-driver\n\n"
                   "[Network]\nVirtualEthernet=no\n")
        host.write("/etc/systemd/system/fake-host-driver.service",
                   "[Unit]\nDescription=The fake NVIDIA module's /proc files (system tests)\nDefaultDependencies=no\n"
                   "After=local-fs.target\nBefore=sysinit.target\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
                   "ExecStart=/bin/mount --bind /var/lib/fake-proc-driver /proc/driver\n"
                   "ExecStart=/bin/mount --bind /var/lib/fake-proc-devices /proc/devices\n")
        os.makedirs(host.p("/etc/systemd/system/sysinit.target.wants"), exist_ok=True)
        os.symlink("/etc/systemd/system/fake-host-driver.service", host.p("/etc/systemd/system/sysinit.target.wants/fake-host-driver.service"))
        host.bind(state.p("/proc/driver"), "/var/lib/fake-proc-driver", read_only=True)
        host.bind(state.p("/proc/devices"), "/var/lib/fake-proc-devices", read_only=True)
        for dev, major, minor in [("nvidiactl", 195, 255), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1), ("nvidia0", 195, 0), ("nvidia1", 195, 1)]:
            make_chardev(host.host(f"dev/{dev}"), major, minor)
            host.bind(host.host(f"dev/{dev}"), f"/dev/{dev}")
        host.bind(gpu.image, "/var/lib/machines/gpu")
        # A host's systemd: the unified hierarchy, where DeviceAllow= is a BPF program; nspawn's system
        # call filter off and every capability, so its own systemd-nspawn@gpu.service can run nspawn.
        host.nspawn_env.update({"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1", "SYSTEMD_SECCOMP": "0"})
        host.nspawn_args.append("--capability=all")
        return host, gpu

    def test_binds_and_live_apply_on_a_host_that_starts_the_machine_with_machinectl(self):
        host, gpu = self.machines()
        host.boot(BOOTED_HOST_SCENARIO, timeout=420)
        out = lambda name: host.read(f"/var/lib/standin/{name}").strip()
        self.assertEqual(out("binds.rc"), "0", out("binds.out"))
        written = out("written.nspawn")
        self.assertIn("PrivateUsers=no", written)  # the operator's lines kept
        self.assertIn("Bind=/dev/nvidia0", written)
        # The settings reached the machine through the file the host's nspawn read.
        verify1 = json.loads(out("verify-1.json"))
        self.assertTrue(verify1["ready"], verify1)
        origin = "host setting unbounded-nvidia.{} (/run/host-nvidia-settings)"
        self.assertEqual(verify1["settings"]["expected_gpus"], {"value": 1, "from": origin.format("expected_gpus")})
        self.assertEqual(verify1["settings"]["gpus"], {"value": ["GPU-00000000-1111-2222-3333-444455556666"], "from": origin.format("gpus")})
        self.assertIn("No such device or address", out("open-nvidia0-1"))  # allowed, bound (no driver: ENXIO)
        self.assertIn("No such file", out("open-nvidia1-1"))
        # Live apply: one bind added, one removed, DeviceAllow= changed, the refresh ran; no restart.
        self.assertEqual(out("apply.rc"), "0", out("apply.err"))
        live = json.loads(out("apply.json"))["live"]
        self.assertEqual(live["state"], "applied", live)
        self.assertIn("bound /dev/nvidia1 at /dev/nvidia1", live["changed"])
        self.assertIn("unmounted /dev/nvidia0", live["changed"])
        self.assertEqual(live["refresh"], "done")
        self.assertEqual(out("leader-1"), out("leader-2"))
        self.assertEqual(out("setup-invocation-1"), out("setup-invocation-2"))
        self.assertNotEqual(out("refresh-invocation-2"), out("refresh-invocation-1"))
        self.assertIn("/dev/nvidia1 rw", out("device-allow-2"))
        self.assertNotIn("/dev/nvidia0 rw", out("device-allow-2"))
        self.assertIn("No such device or address", out("open-nvidia1-2"))  # permitted by the live DeviceAllow=
        self.assertIn("No such file", out("open-nvidia0-2"))
        verify2 = json.loads(out("verify-2.json"))
        self.assertTrue(verify2["ready"], verify2)
        self.assertEqual(verify2["settings"]["gpus"]["value"], ["GPU-11111111-2222-3333-4444-555566667777"])
        # Files written before, applied after: nothing left to write, the machine changed all the same.
        self.assertEqual(out("apply-back.rc"), "0", out("apply-back.err"))
        back = json.loads(out("apply-back.json"))
        self.assertEqual(back["written"], [])
        self.assertIn("bound /dev/nvidia0 at /dev/nvidia0", back["live"]["changed"])
        self.assertIn("unmounted /dev/nvidia1", back["live"]["changed"])
        self.assertIn("No such device or address", out("open-nvidia0-3"))
        self.assertIn("No such file", out("open-nvidia1-3"))
        self.assertEqual(out("leader-1"), out("leader-3"))
        # The kill switch: named as not live, then at the next start no setup unit, whatever the typo.
        self.assertEqual(out("off.rc"), "1", out("off.out"))
        self.assertIn("Not applied live: the kill switch", out("off.out"))
        self.assertNotIn("unbounded-nvidia.enabled", out("settings-after-off"))  # not even the files: they are bound live
        self.assertEqual(out("setup-load-off"), "not-found")
        self.assertEqual(gpu.read("/var/lib/standin/containerd/setup-load").strip(), "not-found")


class TestCredentials(SystemCase):
    def test_a_credential_the_host_passed_reaches_the_sandboxed_setup_and_verify(self):
        """Issue 45, item 4, on systemd 252: setup's unit loads the host's credentials (LoadCredential=; its
        mount namespace hides /run/credentials/@system), verify reads the system's."""
        m = self.gpu_machine("credentials", gpus=1)
        m.binds.append("--set-credential=unbounded-nvidia.expected_gpus:2")
        m.boot()
        setup = " ".join(msg for _, _, msg in m.messages("_SYSTEMD_UNIT=unbounded-nvidia-setup.service"))
        self.assertIn("expected_gpus is 2 but the machine offers 1 GPU(s)", setup)
        verify = m.json("/var/lib/standin/containerd/verify.json")
        self.assertEqual(verify["outcome"], "gpus-missing", verify)
        self.assertEqual(verify["settings"]["expected_gpus"],
                         {"value": 2, "from": "credential unbounded-nvidia.expected_gpus (/run/credentials/@system)"})


class TestSelfRepair(SystemCase):
    """A boot whose setup failed because the host was not ready heals by itself once it is: the refresh
    that builds a ready root starts containerd, then kubelet (kubeadm-shaped: no Requires=containerd),
    with nothing run in the machine by anyone. Never an operator's stopped unit, never a loop."""

    def units(self, m, name):
        return dict(line.split() for line in m.read(f"/var/lib/standin/units-{name}").splitlines())

    def assertHeldBack(self, m, name):
        self.assertEqual(self.units(m, name), {"containerd": "inactive", "kubelet": "inactive", "unbounded-nvidia-setup": "failed"})
        self.assertEqual(m.read(f"/var/lib/standin/verify-{name}.rc").strip(), "1")
        v = m.json(f"/var/lib/standin/verify-{name}.json")
        self.assertFalse(v["ready"])
        problems = {p["path"]: p["message"] for p in v["problems"]}
        for unit in ("containerd.service", "kubelet.service"):
            self.assertIn(unit, problems, v["problems"])
            self.assertIn("held it back", problems[unit])

    def assertHealed(self, m, name):
        self.assertEqual(self.units(m, name), {"containerd": "active", "kubelet": "active", "unbounded-nvidia-setup": "active"},
                         m.read("/var/lib/standin/scenario-errors", ""))
        self.assertEqual(m.read(f"/var/lib/standin/verify-{name}.rc").strip(), "0", m.read(f"/var/lib/standin/verify-{name}.err"))
        self.assertTrue(m.json(f"/var/lib/standin/verify-{name}.json")["ready"])
        healed = m.journal("MESSAGE_ID=0336e6fed63b469aac716429d562c391")
        self.assertEqual(len(healed), 1)
        self.assertEqual(healed[0]["UNBOUNDED_NVIDIA_UNITS"], "containerd.service and kubelet.service")
        # In the heal: containerd up before kubelet starts.
        msgs = [(t, msg) for t, _, msg in m.messages("_PID=1")]
        up = [t for t, msg in msgs if msg.startswith("Started containerd.service")]
        kubelet = [t for t, msg in msgs if msg.startswith("Starting kubelet.service") or msg.startswith("Started kubelet.service")]
        self.assertTrue(up and kubelet, "containerd or kubelet never started")
        self.assertLess(up[0], kubelet[0], "kubelet started before containerd was up")

    def assertHealsAfter(self, m, host_fix, version):
        """Boots `m`, whose setup fails; the host then does `host_fix` while the machine runs, and with
        nothing run in the machine containerd and kubelet come up within 60 s, serving `version`."""
        m.boot(HEAL_RECORD + """
state failed
host_turn 1
wait_for 60 systemctl is-active -q kubelet.service
state healed
""", host_turns=[host_fix])
        self.assertHeldBack(m, "failed")
        self.assertHealed(m, "healed")
        self.assertReadyFor(m, version, verify=False)  # what containerd found when the heal started it

    def test_staging_completed_by_the_host_after_a_failed_boot(self):
        m = self.gpu_machine("heal-staging", staging=False)
        self.stage(m, V1, broken=True)  # half-upgraded: libnvidia-ml of another version
        m.write("/etc/unbounded/nvidia.yaml", "staging_timeout: 3s\nrefresh:\n  settle_time: 2s\n")

        def complete():  # the host's upgrade finishes: files appear in the bound directory
            d = m.staging_root.p("/run/host-nvidia/0")
            os.rename(os.path.join(d, f"libnvidia-ml.so.{V2}"), os.path.join(d, f"libnvidia-ml.so.{V1}"))
        self.assertHealsAfter(m, complete, V1)

    def test_a_module_of_another_version_healed_by_the_timer(self):
        m = self.gpu_machine("heal-module", version=V2)
        m.fake_module(proc_version_text(V1))  # the host's new module is not loaded yet
        m.write("/etc/unbounded/nvidia.yaml", "staging_timeout: 3s\nrefresh:\n  settle_time: 1s\n  interval: 10s\n")
        self.assertHealsAfter(m, lambda: m.fake_module(proc_version_text(V2)), V2)

    def test_an_operator_stopped_containerd_stays_stopped(self):
        m = self.gpu_machine("heal-operator")
        m.boot(HEAL_RECORD + """
systemctl stop containerd.service
systemctl start unbounded-nvidia-refresh.service
state stopped
""")
        self.assertEqual(self.units(m, "stopped"), {"containerd": "inactive", "kubelet": "active", "unbounded-nvidia-setup": "active"})
        v = m.json("/var/lib/standin/verify-stopped.json")
        self.assertEqual(m.read("/var/lib/standin/verify-stopped.rc").strip(), "1")
        self.assertEqual([p["path"] for p in v["problems"]], ["containerd.service"])
        self.assertIn("nothing will start it", v["problems"][0]["message"])
        self.assertEqual(m.journal("MESSAGE_ID=0336e6fed63b469aac716429d562c391"), [])

    def test_a_host_that_never_becomes_ready_causes_no_loop(self):
        m = self.gpu_machine("heal-never", staging=False)
        self.stage(m, V1, broken=True)
        m.write("/etc/unbounded/nvidia.yaml", "staging_timeout: 2s\nrefresh:\n  settle_time: 1s\n")
        m.boot(HEAL_RECORD + """
systemctl start unbounded-nvidia-refresh.service
systemctl start unbounded-nvidia-refresh.service
sleep 3
state never
""")
        self.assertHeldBack(m, "never")
        refresh_failed = m.journal("MESSAGE_ID=0e5c9147dad245b8a13814a30adddc74")
        self.assertEqual(len(refresh_failed), 2, [e["MESSAGE"] for e in refresh_failed])
        self.assertEqual(len(m.journal("MESSAGE_ID=59a6c10a04f94e3c9b5851e03f3004f7")), 1)  # the boot's, once
        starts = [msg for _, _, msg in m.messages("_PID=1") if msg.startswith("Starting unbounded-nvidia-setup.service")]
        self.assertEqual(len(starts), 1, "setup ran again: a restart loop")


REFRESH_SCENARIO_RECORD = """
record() {  # record NAME: what a GPU consumer would find now, once the consumers' unit a change queued is done
	wait_for 30 sh -c '! systemctl list-jobs --no-legend | grep -q unbounded-nvidia-consumers && ! systemctl is-active -q unbounded-nvidia-consumers.service'
	cp /run/unbounded-nvidia/status.json $out/status-$1.json
	cp /etc/cdi/nvidia.yaml $out/spec-$1.yaml
	find /run/nvidia/driver -printf '%y %p -> %l\\n' | sort > $out/root-$1.txt
	/usr/bin/unbounded-nvidia-setup verify --json > $out/verify-$1.json 2> $out/verify-$1.err
	echo $? > $out/verify-$1.rc
}
units() {  # units NAME: containerd's main PID and the setup unit's invocation, to show neither restarted
	systemctl show -p MainPID --value containerd.service > $out/containerd-pid-$1
	systemctl show -p InvocationID --value unbounded-nvidia-setup.service > $out/setup-invocation-$1
}
"""


def oci_config(name):
    """A minimal OCI bundle config: the machine's /usr read-only, /dev/nvidia0 allowed (as a GPU pod's
    is) and /dev/nvidia1 present but not allowed (the control: EPERM shows the rules are enforced).
    The container reports what opening each gives, before and after the test reloads systemd."""
    probe = ("(exec 3</dev/nvidia1) 2>/out/$1-denied; (exec 3</dev/nvidia0) 2>/out/$1-before; touch /out/$1-ready; "
             "while [ ! -e /out/$1-reloaded ]; do sleep 0.1; done; (exec 3</dev/nvidia0) 2>/out/$1-after; touch /out/$1-done; "
             "sleep 60")
    node = {"type": "c", "major": 195, "fileMode": 0o666, "uid": 0, "gid": 0}
    return {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/sh", "-c", probe, "sh", name],
                    "env": ["PATH=/usr/bin:/bin"], "cwd": "/", "noNewPrivileges": True},
        "root": {"path": "rootfs", "readonly": True},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755", "size=1m"]},
                   {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]},
                   {"destination": "/out", "type": "bind", "source": "/var/lib/standin", "options": ["rbind", "rw"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}],
                  "devices": [{"path": "/dev/nvidia0", "minor": 0, **node}, {"path": "/dev/nvidia1", "minor": 1, **node}],
                  "resources": {"devices": [{"allow": False, "access": "rwm"},
                                            {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rw"}]},
                  "cgroupsPath": f"system.slice:unbounded-test:{name}"}}


# One container's life: started by runc with the systemd cgroup driver (as containerd's runc shim
# runs a pod with SystemdCgroup = true), then a daemon-reload while it runs.
RUNC_CONTAINER = """
run_container() {  # run_container NAME
	runc --systemd-cgroup run -d --no-new-keyring --bundle /var/lib/ctr/$1 $1 > $out/$1-runc.log 2>&1 < /dev/null
	wait_for 20 test -e $out/$1-ready
	systemctl show unbounded-test-$1.scope -p DeviceAllow > $out/$1-device-allow
	systemctl daemon-reload
	touch $out/$1-reloaded
	wait_for 20 test -e $out/$1-done
	runc delete -f $1 >> $out/$1-runc.log 2>&1
}
for c in without-link with-link; do
	mkdir -p /var/lib/ctr/$c/rootfs/usr /var/lib/ctr/$c/rootfs/dev /var/lib/ctr/$c/rootfs/proc /var/lib/ctr/$c/rootfs/out
	ln -s usr/bin /var/lib/ctr/$c/rootfs/bin
	ln -s usr/lib /var/lib/ctr/$c/rootfs/lib
	ln -s usr/lib64 /var/lib/ctr/$c/rootfs/lib64
done
"""


class TestDeviceAccessAfterDaemonReload(SystemCase):
    """Issue 25, item 6. runc's systemd cgroup driver gives systemd DeviceAllow=/dev/char/<major>:<minor>
    and skips a rule whose /dev/char path is missing; an nspawn machine has no udev, so nothing makes
    /dev/char/195:0 for a bound /dev/nvidia0. A daemon-reload then re-applies systemd's rules and the
    running container loses its GPU (nvidia-container-toolkit issues 48, 251, 932, 1227). Setup makes
    the links; this shows the loss without them and the GPU kept with them, in one booted machine."""

    def test_a_runc_container_keeps_its_gpu_across_a_daemon_reload(self):
        m = self.gpu_machine("devchar")
        m.enforce_device_rules()
        for name in ("without-link", "with-link"):
            m.write(f"/var/lib/ctr/{name}/config.json", json.dumps(oci_config(name)))
        m.boot(RUNC_CONTAINER + """
readlink /dev/char/195:0 > $out/link-at-boot
# As before setup made the links: the machine's /dev has none for the bound GPU.
rm /dev/char/195:0
run_container without-link
# Setup again (what every boot and refresh runs) puts the link back.
systemctl restart unbounded-nvidia-setup.service
readlink /dev/char/195:0 > $out/link-after-setup
run_container with-link
systemctl poweroff
""")
        errors = m.read("/var/lib/standin/scenario-errors", "")
        self.assertEqual(errors, "", m.read("/var/lib/standin/without-link-runc.log", "") + m.read("/var/lib/standin/with-link-runc.log", ""))
        self.assertEqual(m.read("/var/lib/standin/link-at-boot").strip(), "../nvidia0")
        self.assertEqual(m.read("/var/lib/standin/link-after-setup").strip(), "../nvidia0")
        for name in ("without-link", "with-link"):
            # The premise: this machine enforces device rules (a device the container was not given
            # is denied), and the GPU opens (no driver behind the fake node: ENXIO) at the start.
            self.assertIn("Operation not permitted", m.read(f"/var/lib/standin/{name}-denied"), name)
            self.assertIn("No such device or address", m.read(f"/var/lib/standin/{name}-before"), name)
        self.assertNotIn("/dev/char/195:0", m.read("/var/lib/standin/without-link-device-allow"))
        self.assertIn("Operation not permitted", m.read("/var/lib/standin/without-link-after"),
                      "without /dev/char/195:0 the daemon-reload should have taken the GPU away")
        self.assertIn("DeviceAllow=/dev/char/195:0 rw", m.read("/var/lib/standin/with-link-device-allow"))
        self.assertIn("No such device or address", m.read("/var/lib/standin/with-link-after"),
                      "with /dev/char/195:0 the container keeps its GPU across the daemon-reload")


class TestRefresh(SystemCase):
    """The host upgrades its driver under the staging mounts while the machine runs."""

    SETTLE = 2

    def upgrade_host_driver(self, m, version):
        """What a host package upgrade does to the bind-mount sources: old files removed, new ones
        renamed in, over the same directories the machine has bound."""
        src = MachineRoot(tmp=m.host(f"upgrade-{version}"))
        src.stage_all(version)
        for n in range(3):
            live = m.staging_root.p(f"/run/host-nvidia/{n}")
            for e in os.listdir(live):
                path = os.path.join(live, e)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            new = src.p(f"/run/host-nvidia/{n}")
            for e in os.listdir(new):
                os.rename(os.path.join(new, e), os.path.join(live, e))

    def refresh_machine(self, name):
        m = self.gpu_machine(name)
        m.fake_module(proc_version_text(V1))
        m.write("/etc/unbounded/nvidia.yaml", f"refresh:\n  settle_time: {self.SETTLE}s\n")
        return m

    def assertNothingRestarted(self, m, before, after):
        self.assertEqual(m.read(f"/var/lib/standin/containerd-pid-{after}"), m.read(f"/var/lib/standin/containerd-pid-{before}"),
                         "containerd was restarted")
        self.assertNotEqual(m.read(f"/var/lib/standin/containerd-pid-{after}").strip(), "0")
        self.assertEqual(m.read(f"/var/lib/standin/setup-invocation-{after}"), m.read(f"/var/lib/standin/setup-invocation-{before}"),
                         "unbounded-nvidia-setup.service was restarted")

    def story(self, m):
        return "\n".join(f"{t / 1e6:10.3f} {msg}" for t, _, msg in
                         m.messages("_SYSTEMD_UNIT=unbounded-nvidia-refresh.service", "+", "UNIT=unbounded-nvidia-refresh.service",
                                    "+", "UNIT=unbounded-nvidia-refresh.path", "+", "_SYSTEMD_UNIT=unbounded-test-scenario.service"))

    def test_userspace_upgrade_under_the_old_module_then_the_module(self):
        """Staging goes V1 -> V2 while module V1 stays loaded: the path unit's refresh keeps the V1
        root (pending-host-reboot) within settle time + 10 s. The host then loads module V2 and its
        reconcile loop starts the refresh service: root and spec go to V2. containerd runs throughout."""
        m = self.refresh_machine("refresh-pending")
        scenario = REFRESH_SCENARIO_RECORD + f"""
units boot
systemctl is-active unbounded-nvidia-refresh.path > $out/refresh-path-state
host_turn 1
wait_for {self.SETTLE + 10} grep -q '"outcome": "pending-host-reboot"' /run/unbounded-nvidia/status.json
record pending
host_turn 2
systemctl start unbounded-nvidia-refresh.service
record swapped
units after
"""
        m.boot(scenario, host_turns=[lambda: self.upgrade_host_driver(m, V2),
                                     lambda: m.fake_module(proc_version_text(V2))])
        story = self.story(m)
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        self.assertEqual(m.read("/var/lib/standin/refresh-path-state").strip(), "active")

        pending = m.json("/var/lib/standin/status-pending.json")
        self.assertEqual((pending["command"], pending["outcome"], pending["driver_version"], pending["staged_driver_version"]),
                         ("refresh", "pending-host-reboot", V1, V2), story)
        self.assertIn(f"libcuda.so.{V1}", m.read("/var/lib/standin/spec-pending.yaml"))
        self.assertNotIn(V2, m.read("/var/lib/standin/spec-pending.yaml"))
        self.assertIn(f"f /run/nvidia/driver/lib/{ARCH}/libcuda.so.{V1} -> ", m.read("/var/lib/standin/root-pending.txt"))
        self.assertEqual(m.read("/var/lib/standin/verify-pending.rc").strip(), "0", m.read("/var/lib/standin/verify-pending.err"))
        self.assertEqual(m.json("/var/lib/standin/verify-pending.json")["outcome"], "pending-host-reboot")
        self.assertEqual(len(m.journal("MESSAGE_ID=c59eebb3050a4e278dde231d1bee3359")), 1)

        swapped = m.json("/var/lib/standin/status-swapped.json")
        self.assertEqual((swapped["outcome"], swapped["driver_version"]), ("ready", V2), story)
        spec = m.read("/var/lib/standin/spec-swapped.yaml")
        self.assertIn(f"libcuda.so.{V2}", spec)
        self.assertNotIn(V1, spec)
        root = m.read("/var/lib/standin/root-swapped.txt")
        self.assertIn(f"f /run/nvidia/driver/lib/{ARCH}/libcuda.so.{V2} -> ", root)
        self.assertNotIn(V1, root)
        self.assertEqual(m.read("/var/lib/standin/verify-swapped.rc").strip(), "0", m.read("/var/lib/standin/verify-swapped.err"))
        self.assertNothingRestarted(m, "boot", "after")

    def test_driver_and_module_upgrade_swaps_through_the_path_unit(self):
        """The host replaced module and userspace (V1 -> V2) in one go: the path-triggered refresh
        alone swaps root and spec within settle time + 10 s, containerd untouched."""
        m = self.refresh_machine("refresh-swap")

        def upgrade():
            m.fake_module(proc_version_text(V2))
            self.upgrade_host_driver(m, V2)
        scenario = REFRESH_SCENARIO_RECORD + f"""
units boot
host_turn 1
wait_for {self.SETTLE + 10} grep -q '"driver_version": "{V2}"' /run/unbounded-nvidia/status.json
wait_for 5 sh -c '! systemctl is-active -q unbounded-nvidia-refresh.service'
record swapped
units after
"""
        m.boot(scenario, host_turns=[upgrade])
        story = self.story(m)
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        swapped = m.json("/var/lib/standin/status-swapped.json")
        self.assertEqual((swapped["command"], swapped["outcome"], swapped["driver_version"]), ("refresh", "ready", V2), story)
        self.assertNotIn(V1, m.read("/var/lib/standin/spec-swapped.yaml"))
        self.assertNotIn(V1, m.read("/var/lib/standin/root-swapped.txt"))
        self.assertEqual(m.read("/var/lib/standin/verify-swapped.rc").strip(), "0", m.read("/var/lib/standin/verify-swapped.err"))
        self.assertNothingRestarted(m, "boot", "after")

    def test_a_daemon_that_stops_and_starts_again_is_followed_within_seconds(self):
        """Issue 34, item 7: nvidia-persistenced stops (its socket goes) and starts again while the
        machine runs. The refresh path unit, watching /run/nvidia-persistenced (from /run until it
        exists), drops the socket's mount from the spec and adds it back within seconds, long before
        the refresh timer (5 min), so no new pod is given a mount of a socket that is not there."""
        m = self.refresh_machine("ipc-restart")
        # A stand-in for the daemon's socket: systemd makes it on start and removes it on stop.
        m.write("/etc/systemd/system/fake-persistenced.socket",
                "[Socket]\nListenStream=/run/nvidia-persistenced/socket\nRemoveOnStop=yes\n")
        m.write("/etc/systemd/system/fake-persistenced.service", "[Service]\nExecStart=/bin/sleep infinity\n")
        mount = "hostPath: /run/nvidia-persistenced/socket"
        scenario = REFRESH_SCENARIO_RECORD + f"""
units boot
grep -c '{mount}' /etc/cdi/nvidia.yaml > $out/mounted-at-boot
for step in started stopped again; do
	date +%s.%N > $out/t0-$step
	if [ $step = stopped ]; then systemctl stop fake-persistenced.socket; else systemctl start fake-persistenced.socket; fi
	if [ $step = stopped ]; then
		wait_for 20 sh -c "! grep -q '{mount}' /etc/cdi/nvidia.yaml"
	else
		wait_for 20 grep -q '{mount}' /etc/cdi/nvidia.yaml
	fi
	date +%s.%N > $out/t1-$step
	wait_for 10 sh -c '! systemctl is-active -q unbounded-nvidia-refresh.service'
	record $step
done
units after
"""
        m.boot(scenario)
        story = self.story(m)
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        self.assertEqual(m.read("/var/lib/standin/mounted-at-boot").strip(), "0")
        for step, present in (("started", True), ("stopped", False), ("again", True)):
            self.assertEqual(mount in m.read(f"/var/lib/standin/spec-{step}.yaml"), present, (step, story))
            self.assertEqual(m.read(f"/var/lib/standin/verify-{step}.rc").strip(), "0", m.read(f"/var/lib/standin/verify-{step}.err"))
            took = float(m.read(f"/var/lib/standin/t1-{step}")) - float(m.read(f"/var/lib/standin/t0-{step}"))
            print(f"# {step}: the spec followed the socket in {took:.2f} s", flush=True)
            self.assertLess(took, self.SETTLE + 15, step)
        self.assertNothingRestarted(m, "boot", "after")


LICENSE_CONFIG = """licensing:
  jitter: 1s
  settle_time: 1s
  stop_timeout: 20s
  reload_interval: 2s
"""


class TestNodeProblemDetector(SystemCase):
    """node-problem-detector's custom plugin monitor as the machine package ships it
    (/usr/share/unbounded-nvidia/unbounded-nvidia-monitor.json): each rule's command run exactly as the
    monitor names it, on a booted machine in each state, and the node conditions NPD would set from
    the results (tests/lib/unbounded_tests/npd.py, both ways NPD releases apply them)."""

    SHIPPED = "/usr/share/unbounded-nvidia/unbounded-nvidia-monitor.json"

    def rules_function(self):
        lines = []
        for i, rule in enumerate(npd.monitor()["rules"]):
            cmd = " ".join(shlex.quote(a) for a in [rule["path"], *rule["args"]])
            lines.append(f"\t{cmd} > $out/npd-$1-{i}.out 2> $out/npd-$1-{i}.err; echo $? > $out/npd-$1-{i}.rc")
        return "npd() {  # npd STATE: every rule of the shipped monitor, as NPD runs it\n" + "\n".join(lines) + "\n}\n"

    def conditions(self, m, state):
        rules = npd.monitor()["rules"]
        results = [int(m.read(f"/var/lib/standin/npd-{state}-{i}.rc").strip()) for i in range(len(rules))]
        lines = [m.read(f"/var/lib/standin/npd-{state}-{i}.out") for i in range(len(rules))]
        for line, rc in zip(lines, results):
            self.assertIn(rc, (0, 1), f"{state}: {lines}")
            self.assertEqual(line.count("\n"), 1, f"{state}: {line!r}")
            self.assertLessEqual(len(line.strip()), 80, line)
        history, last = npd.conditions_over_intervals(rules, results)
        self.assertEqual(len({json.dumps(h, sort_keys=True) for h in history}), 1, f"{state}: flaps: {history}")
        self.assertEqual(history[-1], last, state)
        return last, lines

    def test_the_shipped_monitor_reports_each_outcome_on_a_booted_machine(self):
        m = self.gpu_machine("npd")
        m.fake_module(proc_version_text(V1))
        m.write("/etc/unbounded/nvidia.yaml", "refresh:\n  settle_time: 2s\n")
        state_dir = "/var/lib/unbounded-nvidia/license"
        scenario = self.rules_function() + f"""
cp {self.SHIPPED} $out/monitor.json
npd ready
mkdir -p -m 0700 {state_dir}
btime=$(sed -n 's/^btime //p' /proc/stat)
uptime=$(cut -d. -f1 /proc/uptime)
printf 'license unlicensed\\nlicense_since %s\\nhost_btime %s\\nhost_uptime %s\\nlicensed_feature 2\\nheld_feature 4\\n' \\
	$(( $(date +%s) - 3600 )) $btime $uptime > {state_dir}/metrics.state
npd license
rm -r {state_dir}
host_turn 1
wait_for 15 grep -q '"outcome": "pending-host-reboot"' /run/unbounded-nvidia/status.json
npd pending
rm /run/nvidia/driver/lib/{ARCH}/libcuda.so.{V1}
npd broken
systemd-run --wait --pipe --quiet /usr/bin/unbounded-nvidia-setup verify --json > $out/pipe.json 2> $out/pipe.err
echo $? > $out/pipe.rc
"""
        m.boot(scenario, host_turns=[lambda: TestRefresh.upgrade_host_driver(self, m, V2)])
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "")
        self.assertEqual(json.loads(m.read("/var/lib/standin/monitor.json")), npd.monitor(), "the installed monitor is not the tree's")
        expect = {
            "ready": {"NvidiaDriverNotReady": False, "NvidiaHostRebootPending": False, "NvidiaLicenseNotAcquired": False,
                      "NvidiaLicenseRebootRequired": False},
            "license": {"NvidiaDriverNotReady": False, "NvidiaHostRebootPending": False, "NvidiaLicenseNotAcquired": True,
                        "NvidiaLicenseRebootRequired": True},
            "pending": {"NvidiaDriverNotReady": False, "NvidiaHostRebootPending": True, "NvidiaLicenseNotAcquired": False,
                        "NvidiaLicenseRebootRequired": False},
            "broken": {"NvidiaDriverNotReady": True, "NvidiaHostRebootPending": False, "NvidiaLicenseNotAcquired": False,
                       "NvidiaLicenseRebootRequired": False},
        }
        for state, want in expect.items():
            got, lines = self.conditions(m, state)
            self.assertEqual(got, want, f"{state}: {lines}")
        _, lines = self.conditions(m, "broken")
        self.assertTrue(any(line.startswith("not-ready: ") for line in lines), lines)
        _, lines = self.conditions(m, "license")
        self.assertIn("FeatureType=4 waits for a host reboot (licensed: FeatureType=2)\n", lines)

        # The host's reconcile loop's form (`systemd-run -M MACHINE --wait --pipe ... verify --json`):
        # the answer on stdout, and what was found in the machine's journal, with its fields.
        self.assertEqual(m.read("/var/lib/standin/pipe.rc").strip(), "1")
        self.assertEqual(m.json("/var/lib/standin/pipe.json")["outcome"], "not-ready")
        self.assertIn("Not ready: ", m.read("/var/lib/standin/pipe.err"))  # the caller still has them
        gone = f"/run/nvidia/driver/lib/{ARCH}/libcuda.so.{V1}"
        logged = [e for e in m.journal("MESSAGE_ID=b4e8983344df4099a49b91cf59d15fea")
                  if e.get("UNBOUNDED_NVIDIA_PATH") == gone and e.get("_SYSTEMD_UNIT", "").startswith("run-")]
        self.assertTrue(logged, "verify run through systemd-run --pipe left nothing in the machine's journal")


class TestLicense(SystemCase):
    def projected(self, m, ts, gridd, token):
        """Writes a projected-volume version ..<ts> into the host licensing dir and swaps ..data."""
        d = m.host("licensing")
        os.makedirs(os.path.join(d, f"..{ts}"), exist_ok=True)
        with open(os.path.join(d, f"..{ts}", "gridd.conf"), "w") as f:
            f.write(gridd)
        with open(os.path.join(d, f"..{ts}", "client_configuration_token.tok"), "w") as f:
            f.write(token)
        return d

    def licensed_machine(self, name):
        """A GPU machine whose licensing source holds v1 (projected-volume layout), nothing installed."""
        m = self.gpu_machine(name)
        d = self.projected(m, "v1", "FeatureType=1\nServerAddress=nls-a\n", "token-1")
        os.symlink("..v1", os.path.join(d, "..data"))
        for n in ("gridd.conf", "client_configuration_token.tok"):
            os.symlink(f"..data/{n}", os.path.join(d, n))
        self.projected(m, "v2", "FeatureType=1\nServerAddress=nls-a\n", "token-2")
        m.bind(d, "/run/host-nvidia-licensing")
        m.write("/etc/unbounded/nvidia.yaml", LICENSE_CONFIG)
        return m

    @staticmethod
    def digest(gridd, token):
        return hashlib.md5((gridd + token).encode()).hexdigest()[:8]

    def test_first_boot_starts_gridd_with_the_files_and_restarts_nothing(self):
        """Issue 13: a fresh machine: the boot install puts the files in place before nvidia-gridd's
        first start, and the first reload run only verifies; SIGTERM and no SIGKILL as systemd loaded it."""
        m = self.licensed_machine("license-first-boot")
        scenario = """
systemctl start unbounded-nvidia-license-reload.service
systemctl show -p ActiveState --value unbounded-nvidia-license-install.service > $out/install-state
systemctl show nvidia-gridd.service -p KillSignal -p SendSIGKILL > $out/gridd-kill
cp /var/lib/standin/gridd.log $out/gridd-log-final
"""
        m.boot(scenario)
        story = "\n".join(msg for _, _, msg in m.messages("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload"))
        log = m.read("/var/lib/standin/gridd-log-final").splitlines()
        starts = [l for l in log if l.startswith("start ")]
        v1 = self.digest("FeatureType=1\nServerAddress=nls-a\n", "token-1")
        self.assertEqual(starts, [f"start {v1} broken=no"], f"{log}\n{story}")
        self.assertFalse(any(l.startswith("sigterm") for l in log), log)
        self.assertEqual(m.read("/var/lib/standin/install-state").strip(), "active")
        self.assertEqual(m.read("/var/lib/standin/gridd-kill").split(), ["KillSignal=15", "SendSIGKILL=no"])
        self.assertIn("Installed the licensing files (client_configuration_token.tok, gridd.conf) are what nvidia-gridd.service starts with", story)
        self.assertIn("started with the licensing files installed at boot", story)
        self.assertIn("token-1", m.read("/var/lib/unbounded-nvidia/license/applied.state"))

    def test_a_rotation_while_nvidia_gridd_restarts_on_its_own_restarts_it_once(self):
        """Issue 26, item 11: a run that finds nvidia-gridd activating leaves the boot install's check to the
        next run. When that run applied a rotation meanwhile, the next one (the 2 s timer here) recorded the
        boot's files over it and restarted nvidia-gridd a second time. nvidia-gridd is activating without a
        job of its own (which the reloader's After= would wait for) while systemd restarts it after a crash
        (Restart=on-failure): that is when a run sees it so. One rotation, one APPLIED, always."""
        m = self.licensed_machine("license-auto-restart")
        m.write("/etc/systemd/system/nvidia-gridd.service.d/restart.conf", "[Service]\nRestart=on-failure\nRestartSec=6s\n")
        scenario = """
state() { systemctl show -p ActiveState --value nvidia-gridd.service; }
# The boot install put v1 in place and nvidia-gridd runs with it; no reload run has checked that yet
# (the timer's first run is 30 s after boot).
kill -KILL "$(systemctl show -p MainPID --value nvidia-gridd.service)"
wait_for 10 sh -c '[ "$(systemctl show -p ActiveState --value nvidia-gridd.service)" = activating ]'
state > $out/gridd-at-rotation
ln -s ..v2 /run/host-nvidia-licensing/..data_tmp
mv -T /run/host-nvidia-licensing/..data_tmp /run/host-nvidia-licensing/..data
wait_for 60 sh -c "journalctl -q -o cat MESSAGE_ID=bcafdef73f1d4c3aba44e70fd75ca0d6 | grep -q ."
# More runs: the timer's, every 2 s, and one started here.
sleep 8
systemctl start unbounded-nvidia-license-reload.service
cp /var/lib/standin/gridd.log $out/gridd-log-final
"""
        m.boot(scenario)
        story = "\n".join(f"{t / 1e6:10.3f} {msg}" for t, _, msg in
                          m.messages("_SYSTEMD_UNIT=unbounded-nvidia-license-reload.service", "+", "UNIT=nvidia-gridd.service",
                                     "+", "_SYSTEMD_UNIT=unbounded-test-scenario.service"))
        story += "\ngridd.log:\n" + m.read("/var/lib/standin/gridd-log-final", "")
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        self.assertEqual(m.read("/var/lib/standin/gridd-at-rotation").strip(), "activating", story)
        self.assertIn("the licensing files installed at boot are checked by the next run", story)
        self.assertEqual(len(m.journal("MESSAGE_ID=bcafdef73f1d4c3aba44e70fd75ca0d6")), 1, story)
        v2 = self.digest("FeatureType=1\nServerAddress=nls-a\n", "token-2")
        starts = [l for l in m.read("/var/lib/standin/gridd-log-final").splitlines() if l.startswith("start ")]
        self.assertEqual(starts.count(f"start {v2} broken=no"), 1, f"nvidia-gridd started twice with v2:\n{story}")
        self.assertIn("token-2", m.read("/var/lib/unbounded-nvidia/license/applied.state"))
        self.assertFalse(os.path.exists(m.p("/var/lib/unbounded-nvidia/license/installed-at-boot.state")))

    def test_poweroff_in_the_middle_of_a_restart_then_a_boot_converges(self):
        """Issue 13: a rotation whose restart of nvidia-gridd is cut by a poweroff: nothing unverified is
        recorded as good or bad, and the next boot starts nvidia-gridd with the rotated files."""
        m = self.licensed_machine("license-poweroff")
        m.write("/etc/standin-gridd-slow-stop", "")  # the poweroff lands while the old daemon is stopping
        first = """
systemctl start unbounded-nvidia-license-reload.service
ln -s ..v2 /run/host-nvidia-licensing/..data_tmp
mv -T /run/host-nvidia-licensing/..data_tmp /run/host-nvidia-licensing/..data
systemctl start --no-block unbounded-nvidia-license-reload.service
wait_for 30 grep -q '^sigterm' /var/lib/standin/gridd.log
echo cut >> $out/steps
systemctl poweroff --no-block
sleep 60
"""
        m.boot(first)
        self.assertIn("cut", m.read("/var/lib/standin/steps"))
        shutil.copy(m.p("/var/lib/standin/gridd.log"), m.p("/var/lib/gridd-boot1.log"))
        boot1 = "\n".join(msg for _, _, msg in m.messages("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload"))
        self.assertNotIn("token-2", m.read("/var/lib/unbounded-nvidia/license/failed.state", ""),
                         "a restart cut by the poweroff was recorded as failed")
        # Either the shutdown refused the start job (the usual case: the old daemon takes 8 s to go),
        # and the outcome stays unknown; or systemd still ran it, and the restart was judged in full.
        cut = "Stopped while nvidia-gridd.service restarted, before it could be judged" in boot1
        judged = "Applied rotated licensing files" in boot1
        self.assertTrue(cut or judged, boot1)
        if cut:
            self.assertNotIn("token-2", m.read("/var/lib/unbounded-nvidia/license/applied.state", ""),
                             "a restart cut by the poweroff was recorded as applied")
        os.unlink(m.p("/etc/standin-gridd-slow-stop"))
        second = """
systemctl start unbounded-nvidia-license-reload.service
systemctl show -p ActiveState --value nvidia-gridd.service > $out/gridd-state
"""
        m.boot(second)
        story = "\n".join(msg for _, _, msg in m.messages("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload"))
        log = m.read("/var/lib/standin/gridd.log").splitlines()
        v2 = self.digest("FeatureType=1\nServerAddress=nls-a\n", "token-2")
        boot2 = log[max(i for i, l in enumerate(log) if l.startswith("start ")):]
        self.assertEqual(boot2[0], f"start {v2} broken=no", f"{log}\n{story}")
        self.assertEqual(m.read("/var/lib/standin/gridd-state").strip(), "active")
        self.assertIn("token-2", m.read("/var/lib/unbounded-nvidia/license/applied.state"), story)
        self.assertFalse(os.path.exists(m.p("/var/lib/unbounded-nvidia/license/restarting.state")))
        self.assertEqual(m.read("/etc/nvidia/ClientConfigToken/client_configuration_token.tok"), "token-2")

    def test_the_license_state_follows_what_nvidia_gridd_says_and_nothing_acts_on_it(self):
        """Issue 28: the stand-in nvidia-gridd logs through the journal as the real one does. Licensed at
        boot; a rotation to a token its license server refuses is applied (the daemon stays up, which is
        all a rotation is judged by) and the state turns unlicensed, with the rotation recorded; after a
        rotation to a good token, licensed again. One MESSAGE_ID per change, the metrics and the
        node-problem-detector condition follow, and nothing is restarted because of the state."""
        m = self.licensed_machine("license-state")
        self.projected(m, "v2", "FeatureType=1\nServerAddress=nls-a\n", "token-2-REFUSED")
        self.projected(m, "v3", "FeatureType=1\nServerAddress=nls-a\n", "token-3")
        m.write("/etc/unbounded/nvidia.yaml", LICENSE_CONFIG + "  not_acquired_after: 3s\n")
        metrics = "/var/lib/prometheus/node-exporter/unbounded-nvidia-license.prom"
        os.makedirs(m.p(os.path.dirname(metrics)))  # node_exporter's textfile directory, as its package makes it
        m.boot(f"""
log=$out/gridd.log
swap() {{
	ln -s "..$1" /run/host-nvidia-licensing/..data_tmp
	mv -T /run/host-nvidia-licensing/..data_tmp /run/host-nvidia-licensing/..data
}}
settled() {{  # the reloader has observed state $1 (a run after nvidia-gridd said it)
	wait_for 30 grep -q "unbounded_nvidia_license_state{{state=\\"$1\\"}} 1" {metrics}
}}
npd() {{ /usr/libexec/unbounded-nvidia/unbounded-nvidia-license-reload --npd > $out/npd-$1; echo "rc=$?" >> $out/npd-$1; }}
settled licensed
cp {metrics} $out/licensed.prom
npd licensed
swap v2
wait_for 30 sh -c "[ \\$(grep -c '^start ' /var/lib/standin/gridd.log) -ge 2 ]"
settled unlicensed
cp {metrics} $out/unlicensed.prom
npd unlicensed-early
sleep 5
npd unlicensed-late
starts_unlicensed=$(grep -c '^start ' /var/lib/standin/gridd.log)
sleep 6  # several reloader runs (every 2 s) see the unlicensed daemon: none restarts it
echo "$starts_unlicensed $(grep -c '^start ' /var/lib/standin/gridd.log)" > $out/starts-while-unlicensed
swap v3
wait_for 30 sh -c "[ \\$(grep -c '^start ' /var/lib/standin/gridd.log) -ge 3 ]"
settled licensed
cp {metrics} $out/recovered.prom
npd recovered
""")
        story = "\n".join(msg for _, _, msg in m.messages("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload"))
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        ids = {"1ffeb0bd3c444ea7a8826604fb437cd2": "licensed", "3287c0ed1ead40f7a65c4c30fa39ca8e": "unlicensed",
               "d070255f69604d838112fbf343ba872d": "pending", "03ce822d9b7b4d55b912d577223ee0cc": "unknown"}
        changes = [e for e in m.journal("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload") if e.get("MESSAGE_ID") in ids]
        states = [ids[e["MESSAGE_ID"]] for e in changes]
        self.assertEqual([s for s in states if s in ("licensed", "unlicensed")], ["licensed", "unlicensed", "licensed"], story)
        self.assertTrue(all(a != b for a, b in zip(states, states[1:])), f"one message per change, not per run: {states}")
        for e in changes:
            self.assertEqual(e["UNBOUNDED_NVIDIA_LICENSE_STATE"], ids[e["MESSAGE_ID"]])
        unlicensed = next(e for e in changes if ids[e["MESSAGE_ID"]] == "unlicensed")
        self.assertEqual(unlicensed["PRIORITY"], "4")  # a warning
        self.assertNotEqual(unlicensed["UNBOUNDED_NVIDIA_LICENSE_ROTATION"], "0", "the rotation it belongs to")

        def values(name):
            text = m.read(f"/var/lib/standin/{name}.prom")
            for secret in ("nls-a", "license.example", "token-", "Compute Server"):
                self.assertNotIn(secret, text)
            return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}

        lic, unlic, rec = values("licensed"), values("unlicensed"), values("recovered")
        self.assertEqual(lic['unbounded_nvidia_license_state{state="licensed"}'], 1)
        self.assertEqual(lic["unbounded_nvidia_license_expiry_timestamp_seconds"], 1925089445)  # 2031-01-02 03:04:05 UTC
        self.assertEqual(unlic['unbounded_nvidia_license_state{state="unlicensed"}'], 1)
        self.assertNotIn("unbounded_nvidia_license_expiry_timestamp_seconds", unlic)
        # "applied, and then not licensed": the state's rotation is the last applied one
        self.assertEqual(unlic["unbounded_nvidia_license_state_rotation_timestamp_seconds"],
                         unlic["unbounded_nvidia_license_last_applied_timestamp_seconds"])
        self.assertGreater(unlic["unbounded_nvidia_license_last_applied_timestamp_seconds"], 0)
        self.assertEqual(rec['unbounded_nvidia_license_state{state="licensed"}'], 1)
        self.assertEqual(rec["unbounded_nvidia_license_state_rotation_timestamp_seconds"],
                         rec["unbounded_nvidia_license_last_applied_timestamp_seconds"])
        self.assertGreater(rec["unbounded_nvidia_license_last_applied_timestamp_seconds"],
                           unlic["unbounded_nvidia_license_last_applied_timestamp_seconds"])
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool is missing: make check installs it (prometheus)")
        for name in ("licensed", "unlicensed", "recovered"):
            r = subprocess.run([promtool, "check", "metrics"], input=m.read(f"/var/lib/standin/{name}.prom"),
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""), name)

        npd = {n: m.read(f"/var/lib/standin/npd-{n}").splitlines() for n in ("licensed", "unlicensed-early", "unlicensed-late", "recovered")}
        self.assertTrue(npd["licensed"][0].startswith("licensed for "), npd)
        self.assertEqual(npd["licensed"][1], "rc=0")
        self.assertEqual(npd["unlicensed-late"][1], "rc=1", npd)
        self.assertIn("unlicensed for", npd["unlicensed-late"][0])
        self.assertEqual(npd["recovered"][1], "rc=0")
        # Observe, never act: the unlicensed daemon was left running.
        before, after = m.read("/var/lib/standin/starts-while-unlicensed").split()
        self.assertEqual(before, after, story)
        for secret in ("nls-a.license.example", "token-2-REFUSED", "Compute Server"):
            self.assertNotIn(secret, story)

    def test_rotation_touch_and_rollback(self):
        m = self.gpu_machine("license")
        d = self.projected(m, "v1", "FeatureType=1\nServerAddress=nls-a\n", "token-1")
        os.symlink("..v1", os.path.join(d, "..data"))
        for n in ("gridd.conf", "client_configuration_token.tok"):
            os.symlink(f"..data/{n}", os.path.join(d, n))
        self.projected(m, "v2", "FeatureType=1\nServerAddress=nls-a\n", "token-2")
        self.projected(m, "v3", "FeatureType=1\nBROKEN\n", "token-3")
        m.bind(d, "/run/host-nvidia-licensing")
        m.write("/etc/unbounded/nvidia.yaml", LICENSE_CONFIG)
        # Issue 13: a bad knob in PID 1's environment (the services see it too) never switches rotation off.
        m.init_args = ["systemd.setenv=VGPU_LICENSE_RELOAD_INTERVAL=soon"]
        # The files nvidia-gridd was installed with at first boot: the first reloader run records them.
        m.write("/etc/nvidia/gridd.conf", "FeatureType=1\nServerAddress=nls-a\n")
        m.write("/etc/nvidia/ClientConfigToken/client_configuration_token.tok", "token-1", 0o600)
        scenario = """
log=$out/gridd.log
swap() {  # kubelet's AtomicWriter: ..data_tmp -> ..<ts>, renamed over ..data
	ln -s "..$1" /run/host-nvidia-licensing/..data_tmp
	mv -T /run/host-nvidia-licensing/..data_tmp /run/host-nvidia-licensing/..data
}
starts() { grep -c '^start ' $log; }
systemctl start unbounded-nvidia-license-reload.service
echo "recorded $(starts)" >> $out/steps

swap v2
wait_for 20 sh -c "[ \\$(grep -c '^start ' $log) -ge 2 ]"
wait_for 20 sh -c "! systemctl is-active -q unbounded-nvidia-license-reload.service"
echo "rotated $(starts)" >> $out/steps

touch /run/host-nvidia-licensing/..v2/gridd.conf /run/host-nvidia-licensing/..v2/client_configuration_token.tok
sleep 6
echo "touched $(starts)" >> $out/steps

swap v3
wait_for 30 sh -c "[ \\$(grep -c '^start ' $log) -ge 4 ]"
sleep 8
echo "rolled-back $(starts)" >> $out/steps
systemctl show -p ActiveState --value nvidia-gridd.service > $out/gridd-state
cp /etc/nvidia/gridd.conf $out/gridd.conf-final
cp /etc/nvidia/ClientConfigToken/client_configuration_token.tok $out/token-final
stat -c %a /etc/nvidia/ClientConfigToken/client_configuration_token.tok > $out/token-mode
"""
        m.boot(scenario)
        story = "\n".join(f"{t / 1e6:10.3f} {msg}" for t, _, msg in
                          m.messages("_SYSTEMD_UNIT=unbounded-nvidia-license-reload.service", "+", "UNIT=unbounded-nvidia-license-reload.service",
                                     "+", "UNIT=unbounded-nvidia-license-reload.path", "+", "UNIT=nvidia-gridd.service",
                                     "+", "_SYSTEMD_UNIT=unbounded-test-scenario.service"))
        story += "\ngridd.log:\n" + m.read("/var/lib/standin/gridd.log", "")
        self.assertEqual(m.read("/var/lib/standin/scenario-errors", ""), "", story)
        steps = dict(line.split() for line in m.read("/var/lib/standin/steps").splitlines())
        self.assertEqual(steps, {"recorded": "1", "rotated": "2", "touched": "2", "rolled-back": "4"})
        log = m.read("/var/lib/standin/gridd.log").splitlines()
        # one SIGTERM before each restart, never a start without the previous daemon gone
        starts = [i for i, l in enumerate(log) if l.startswith("start ")]
        for prev, nxt in zip(starts, starts[1:]):
            between = log[prev + 1:nxt]
            self.assertTrue(any(l.startswith(("sigterm", "exit-bad-config")) for l in between),
                            f"daemon started again without the previous one ending: {log}")
        self.assertEqual(sum(l.startswith("sigterm") for l in log[:starts[3]]), 2)
        self.assertIn("broken=yes", log[starts[2]])
        self.assertEqual(log[starts[3]].split()[1], log[starts[1]].split()[1], "rollback did not restore v2")
        self.assertEqual(m.read("/var/lib/standin/gridd-state").strip(), "active")
        self.assertEqual(m.read("/var/lib/standin/token-final"), "token-2")
        self.assertEqual(m.read("/var/lib/standin/token-mode").strip(), "600")
        self.assertEqual(len(m.journal("MESSAGE_ID=60946feb744847e99a94e6d6a04d7df9")), 2)  # rollback, loudly
        applied = m.journal("MESSAGE_ID=bcafdef73f1d4c3aba44e70fd75ca0d6")
        self.assertEqual(len(applied), 1)
        self.assertTrue(any("Ignoring VGPU_LICENSE_RELOAD_INTERVAL='soon'" in e.get("MESSAGE", "")
                            for e in m.journal("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload")), story)
        for e in m.journal("SYSLOG_IDENTIFIER=unbounded-nvidia-license-reload"):
            self.assertNotIn("token-", e.get("MESSAGE", ""))
            self.assertNotIn("nls-a", e.get("MESSAGE", ""))


SOURCE_ROOT = os.environ.get("SOURCE_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
# {MESSAGE_ID: its name in lib/core/message_ids.hpp}
MESSAGE_IDS = {v: k for k, v in re.findall(r'inline constexpr const char \*(\w+) = "([0-9a-f]{32})";',
                                           open(os.path.join(SOURCE_ROOT, "lib", "core", "message_ids.hpp")).read())}


def catalog_entries():
    """{MESSAGE_ID: [Subject, first body line]} of units/unbounded-nvidia-setup.catalog, read as systemd's
    catalog.c reads it (tests/unit/test_catalog.py holds the file to that format)."""
    entries, current, in_headers = {}, None, False
    for line in open(os.path.join(SOURCE_ROOT, "units", "unbounded-nvidia-setup.catalog")).read().split("\n"):
        if line[:1] in ("#", ";"):
            continue
        if re.fullmatch(r"-- [0-9a-f]{32}", line):
            current, in_headers = line[3:], True
            entries[current] = ["", ""]
        elif current and in_headers:
            if not line.strip():
                in_headers = False
            elif line.startswith("Subject: "):
                entries[current][0] = line[len("Subject: "):]
        elif current and line.strip() and not entries[current][1]:
            entries[current][1] = line
    return entries


class TestMessageCatalog(SystemCase):
    """Issue 35, item 5: `journalctl -x` in the machine explains each MESSAGE_ID it logged with the
    catalog's text, the entry's fields filled in, and `journalctl --list-catalog` there lists every
    MESSAGE_ID of message_ids.hpp. One boot provokes what it can without host turns: fewer GPUs than
    expected_gpus, a side spec of ours for devices that are gone, a containerd of unknown version with
    CDI off; then `verify`, run as a unit (its stderr the journal), against a stale device plugin spec
    and a spec in /var/run/cdi that shadows ours."""

    # What this machine must log; every other MESSAGE_ID of ours that it logs is checked the same way.
    PROVOKED = ("SETUP_READY", "GPUS_MISSING", "CDI_SPEC_REMOVED", "CONTAINERD_CONFIG_UNKNOWN", "CONTAINERD_CDI_OFF",
                "VERIFY_FAILED", "DEVICE_PLUGIN_SPEC_STALE", "CDI_SPEC_SHADOWED")

    def test_journalctl_x_explains_each_message_id(self):
        lib = f"/run/nvidia/driver/lib/{ARCH}"
        plugin = json.dumps({"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu",
                             "devices": [{"name": "GPU-00000000-1111-2222-3333-444455556666",
                                          "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
                             "containerEdits": {"mounts": [{"hostPath": f"{lib}/libcuda.so.{V2}",
                                                            "containerPath": f"/lib/{ARCH}/libcuda.so.{V2}",
                                                            "options": ["ro", "nosuid", "nodev", "rbind"]}]}})
        shadow = json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
                             "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}]})
        # The package's install has systemd's dpkg trigger run `journalctl --update-catalog`; nothing
        # does after `meson install` into the image, so the scenario runs it first. /var/run is the
        # machine's tmpfs /run: what a pod writes there is written once the machine is up.
        ids = " ".join(MESSAGE_IDS)
        scenario = f"""
journalctl --update-catalog 2> $out/update-catalog.err
echo $? > $out/update-catalog.rc
mkdir -p /var/run/cdi
echo '{plugin}' > /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json
echo '{shadow}' > /var/run/cdi/nvidia.yaml
systemd-run --wait --quiet -p StandardOutput=journal -p StandardError=journal /usr/bin/unbounded-nvidia-setup verify
echo $? > $out/verify.rc
journalctl --sync
journalctl --list-catalog --no-pager > $out/list-catalog 2>&1
mkdir -p $out/x
for id in {ids}; do
	journalctl -x -q --no-pager -o short MESSAGE_ID=$id > $out/x/$id 2>&1
done
"""
        m = self.gpu_machine("catalog")
        self.assertTrue(os.path.isfile(m.p("/usr/lib/systemd/catalog/unbounded-nvidia-setup.catalog")),
                        "meson install put no catalog into the image's /usr/lib/systemd/catalog")
        m.write("/etc/unbounded/nvidia.yaml", "expected_gpus: 3\n")
        m.write("/etc/cdi/nvidia-imex-channel.yaml", "# Written by unbounded-nvidia-setup 0.1.0; removed with it, do not edit\n"
                "---\ncdiVersion: 0.5.0\nkind: nvidia.com/imex-channel\ndevices: []\n")
        m.write("/usr/local/bin/containerd", "#!/bin/sh\nexit 1\n", 0o755)  # not in dpkg's database: its version unknown
        m.write("/etc/containerd/config.toml", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n')
        m.boot(scenario)
        self.assertEqual(m.read("/var/lib/standin/update-catalog.rc").strip(), "0", m.read("/var/lib/standin/update-catalog.err"))
        self.assertEqual(m.read("/var/lib/standin/verify.rc").strip(), "1", "verify was ready despite what was planted")

        catalog = catalog_entries()
        listed = dict(line.split(" ", 1) for line in m.read("/var/lib/standin/list-catalog").splitlines() if " " in line)
        for mid, name in MESSAGE_IDS.items():
            self.assertTrue(mid in listed, f"journalctl --list-catalog in the machine does not list {name} {mid}")
            self.assertTrue(listed[mid].endswith(": " + catalog[mid][0]), f"{name}: listed as {listed[mid]!r}")

        def fill(text, entry):  # as journalctl does: @FIELD@ is the entry's field, or FIELD where it has none
            return re.sub(r"@([^@\s]+)@", lambda f: str(entry.get(f.group(1), f.group(1))), text)

        logged = set()
        for mid, name in MESSAGE_IDS.items():
            entries = m.journal(f"MESSAGE_ID={mid}")
            if not entries:
                continue
            logged.add(name)
            shown = m.read(f"/var/lib/standin/x/{mid}")
            subject, first = catalog[mid]
            for e in entries:
                self.assertIn(e["MESSAGE"], shown, f"{name}: journalctl -x did not show the message")
                self.assertIn("Subject: " + fill(subject, e), shown, f"{name}: not the catalog's Subject:\n{shown}")
                self.assertIn(fill(first, e), shown, f"{name}: not the catalog's text with the fields filled in:\n{shown}")
            self.assertNotIn("UNBOUNDED_NVIDIA_", shown, f"{name}: a catalog field the message does not carry:\n{shown}")
        self.assertEqual(sorted(set(self.PROVOKED) - logged), [], f"not logged in this machine; logged: {sorted(logged)}")
        print(f"# journalctl -x explained {len(logged)} MESSAGE_IDs: {', '.join(sorted(logged))}", flush=True)


if __name__ == "__main__":
    main()
