"""Issue 47, item 4: the fleet's day of tests/stateful/test_fleet_day.py, booted. A few random sequences
of host events and machine actions run in the containerd tier's trixie machine (its fourth boot), and
after every step the kubelet stand-in makes a GPU pod through the CRI: what must hold is what the next
pod sees, not only what our files say (the fake-root tier checks those, thousands of times faster).

The steps: the host stages the other driver (535 <-> 550, under the staging binds; the path unit's
refresh follows), loads the other kernel module (the fake /proc version; nothing follows: no unit can
watch a module), a GPU falls off the bus or comes back (its /proc entry and its node), the machine's
staging binds are unmounted or mounted again, a refresh (as the path unit or the timer start it), a
daemon-reload, a restart of containerd. After each, once no refresh runs or waits, `verify --json`
and a pod asking for nvidia.com/gpu=all or =0 by the CDIDevices field, and:

  truthful  verify ready => the pod starts, sees exactly the GPU nodes the machine has (GPU 0's alone
            for =0), each opening with ENXIO, a node it was not given denied, and libcuda and
            libnvidia-ml of the loaded module's version, byte-identical to the host's
  one       a pod that gets a driver gets one version, the driver root's, byte-identical to the
            host's files of it: never a mix, never a copy the root no longer holds. (Not always the
            module's: after the host loads another module, the next pod gets the root it finds until
            a refresh can swap it; nothing in the machine can hold pods back then. verify must not
            be ready then, which `truthful` checks.)
  live      verify is ready, and a refresh succeeds, when the host staged the loaded module's
            version, staging is bound, a GPU is there and a refresh ran since any of these changed

Each sequence starts from a ready machine: what the last one changed is put back (staging bound, the
boot's version staged and loaded, both GPUs, the path unit restarted if the binds went, a refresh) and
`live` checked there. The seed (CHECK_SEED unless STATEFUL_SEED gives one) is printed; STATEFUL_SEED replays it (with the same boot before it).
Every step prints as a line of the story, and a failure names the seed and the story so far."""

import json
import os
import random
import re
import shutil
import time
import traceback

from pods import BINDS, LIB, PROBE_DEVICES, PROBE_SMI, UUIDS, parse, sha256
from unbounded_tests.harness import ARCH, proc_version_text

SEQUENCES = 3
STEPS = 6
REFRESH = "unbounded-nvidia-refresh.service"
# A refresh that changed the driver or the GPUs queues it (no pod of these sequences is one of its
# consumers: it finds none and ends at once); verify waits for it, so the machine is settled after it.
CONSUMERS = "unbounded-nvidia-consumers.service"
ROOT = "/run/nvidia/driver"
MANIFEST = f"{ROOT}/.unbounded-manifest.json"
CONTROL_NODES = ["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"]
# Where the boot binds the staging directories and the GPU nodes a second time, for the machine to
# bind them again after a step unmounted them.
HOLD = "/var/lib/unbounded-test/hold"
# No timer refresh in the boot: every refresh is a step's, or the path unit's after the host staged.
CONFIG = "refresh:\n  settle_time: 2s\n  interval: 1h\n"

# The probe when the version a pod gets is not known beforehand: every versioned libcuda and
# libnvidia-ml file it has (not the SONAME links).
PROBE_ANY = PROBE_DEVICES + """for f in /usr/lib/@ARCH@/libcuda.so.* /usr/lib/@ARCH@/libnvidia-ml.so.*; do
	case "$f" in *.so.[0-9]*.[0-9]*) [ -f "$f" ] && [ ! -L "$f" ] && sha256sum "$f" | while read -r l; do echo "SUM $l"; done ;; esac
done
""" + PROBE_SMI

# No refresh running or queued, seen twice 0.3 s apart.
QUIET = f"""quiet() {{
	! systemctl list-jobs --no-legend 2>/dev/null | grep -q -e {REFRESH} -e {CONSUMERS} &&
	[ "$(systemctl is-active {REFRESH})" != activating ] && [ "$(systemctl is-active {CONSUMERS})" != activating ]
}}
for i in $(seq 900); do quiet && sleep 0.3 && quiet && exit 0; sleep 0.1; done
echo "a refresh (or the consumers' restart after it) still ran or waited after 90 s"; exit 1"""


def bus(minor):
    return f"0000:{0x18 + minor:02x}:00.0"


def prepare(m, staging):
    """Before the boot: the configuration, and the second binds of the staging directories and GPU
    nodes that the unbind and GPU steps take away and give back."""
    m.write("/etc/unbounded/nvidia.yaml", CONFIG)
    for n, d in enumerate(staging):
        m.bind(d, f"{HOLD}/staging/{n}", read_only=True)
    for minor in range(len(UUIDS)):
        m.bind(m.host(f"dev/nvidia{minor}"), f"{HOLD}/nvidia{minor}")


class BootedDay:
    """The host's and the machine's side of the sequences, and the model: what the host did (staged,
    module, GPUs, binds) and whether a refresh ran since (fresh)."""

    def __init__(self, case, node, staging, versions, staged):
        self.case = case  # a TestCase of the tier: its pod assertions and its host trees (case.hosts)
        self.m = case.m
        self.node = node
        self.staging = staging
        self.versions = versions
        self.base = staged
        self.staged = self.module = staged
        self.gpus = set(range(len(UUIDS)))
        self.bound = True
        self.watched = True  # the path unit's watches are on the bound staging
        self.fresh = True  # the boot's setup ran on this
        self.story = []
        self.at = "the boot"  # the step in progress, for a failure
        self.stats = {"steps": 0, "ready": 0, "live": 0, "driver pods": 0, "refused pods": 0}

    # -- the story -----------------------------------------------------------------------------------
    def say(self, line):
        self.story.append(line)
        print(f"# {line}", flush=True)

    def state(self):
        gpus = " ".join(str(g) for g in sorted(self.gpus)) or "none"
        return (f"staged {self.staged}{'' if self.bound else ' (unbound)'}, module {self.module}, GPUs {gpus}"
                f"{'' if self.fresh else ', no refresh since'}")

    # -- the machine ---------------------------------------------------------------------------------
    def sh(self, script, timeout=60):
        rc, out = self.node.sh(script, timeout=timeout)
        return rc, out.strip()

    def must(self, script, timeout=60):
        rc, out = self.sh(script, timeout)
        assert rc == 0, f"in the machine, {script!r} exited {rc}: {out[-800:]}"
        return out

    def invocation(self):
        return self.must(f"systemctl show -p InvocationID --value {REFRESH}")

    def outcome(self):
        rc, out = self.sh("cat /run/unbounded-nvidia/status.json")
        try:
            s = json.loads(out)
        except ValueError:
            return "no status.json"
        return f"{s.get('command')} {s.get('outcome')}"

    def settle(self):
        self.must(QUIET, timeout=120)

    def await_refresh(self, before, seconds):
        """Whether a refresh started after `before` (its invocation) within `seconds`; then quiet."""
        rc, _ = self.sh(f"for i in $(seq {seconds * 10}); do [ \"$(systemctl show -p InvocationID --value {REFRESH})\" != '{before}' ] "
                        "&& exit 0; sleep 0.1; done; exit 1", timeout=seconds + 30)
        self.settle()
        return rc == 0

    # -- the steps -----------------------------------------------------------------------------------
    def step_stage(self):
        """The host stages the other driver: the live entries of each staging directory renamed away,
        the other version's renamed in (copied once from its host tree, kept after)."""
        version = self.other(self.staged)
        before = self.invocation()
        for n, live in enumerate(self.staging):
            away = self.m.host(f"stash/{self.staged}/{n}")
            os.makedirs(away, exist_ok=True)
            for e in os.listdir(live):
                os.rename(os.path.join(live, e), os.path.join(away, e))
            kept = self.m.host(f"stash/{version}/{n}")
            if not os.path.isdir(kept):
                src = self.case.hosts[version].p(BINDS[n])
                shutil.copytree(src, kept, symlinks=True) if os.path.isdir(src) else os.makedirs(kept)
            for e in os.listdir(kept):
                os.rename(os.path.join(kept, e), os.path.join(live, e))
        self.staged = version
        if self.bound and self.watched:
            assert self.await_refresh(before, 60), "the path unit started no refresh within 60 s of the host staging " + version
            self.fresh = True
            return f"stage {version}: the path unit's refresh: {self.outcome()}"
        # Unbound in the machine (or watched from before an unbind): a refresh may come or not, and
        # sees nothing the machine's binds do not show.
        ran = self.await_refresh(before, 3)
        return f"stage {version} (staging unbound or unwatched: {'a' if ran else 'no'} refresh)"

    def step_module(self):
        """The host loads the other kernel module. No unit can watch a module: nothing in the machine
        runs until the next refresh."""
        version = self.other(self.module)
        self.m.fake_module(proc_version_text(version))
        self.module = version
        self.fresh = False
        self.settle()
        return f"load module {version}"

    def step_gpu(self, minor=None):
        """A GPU falls off the bus (its /proc entry and its node go) or comes back. No unit watches
        them either."""
        minor = self.rng.randrange(len(UUIDS)) if minor is None else minor
        info, away = self.m.host(f"proc-driver/nvidia/gpus/{bus(minor)}"), self.m.host(f"gpu-away/{bus(minor)}")
        if minor in self.gpus:
            os.rename(info, away)
            self.must(f"umount /dev/nvidia{minor} && rm /dev/nvidia{minor}")
            self.gpus.discard(minor)
            what = "falls off the bus"
        else:
            os.rename(away, info)
            self.must(f"touch /dev/nvidia{minor} && mount --bind {HOLD}/nvidia{minor} /dev/nvidia{minor}")
            self.gpus.add(minor)
            what = "comes back"
        self.fresh = False
        self.settle()
        return f"GPU {minor} {what}"

    def step_binds(self):
        """The machine's staging binds unmounted, leaving their empty mount points, or mounted again.
        A mount is no event a path unit sees: only a refresh notices."""
        if self.bound:
            self.must(" && ".join(f"umount /run/host-nvidia/{n}" for n in range(len(self.staging))))
            self.bound = self.watched = False
            what = "unbound"
        else:
            self.must(" && ".join(f"mount --bind -o ro {HOLD}/staging/{n} /run/host-nvidia/{n}" for n in range(len(self.staging))))
            self.bound = True
            what = "bound again"
        self.fresh = False
        self.settle()
        return f"staging {what}"

    def step_refresh(self):
        """A refresh, as the path unit or the timer start it. `live`: it must succeed on a ready host."""
        rc, out = self.sh(f"systemctl start {REFRESH}", timeout=300)
        could = self.bound and self.staged == self.module and bool(self.gpus)
        assert rc == 0 or not could, f"live: a refresh failed though the host staged and loaded {self.module}: {out[-600:]} " \
                                     f"({self.outcome()})"
        self.fresh = True
        self.settle()
        return f"refresh: exit {rc}, {self.outcome()}"

    def step_daemon_reload(self):
        self.must("systemctl daemon-reload")
        self.settle()
        return "daemon-reload"

    def step_containerd(self):
        """containerd restarted (an upgrade, an operator): it reads the specs again, and the CRI
        client connects again."""
        self.must("systemctl restart containerd.service", timeout=120)
        self.node.reconnect()
        self.settle()
        return "restart containerd"

    # What a step may be. A refresh is drawn twice as often: it is what brings a machine back, and
    # `live` says the most after one.
    KINDS = ("stage", "module", "gpu", "binds", "refresh", "refresh", "daemon_reload", "containerd")

    def other(self, version):
        return self.versions[1] if version == self.versions[0] else self.versions[0]

    def reset(self):
        """Back to a ready machine: the binds, with the path unit restarted (its watches on the bound
        staging again), the boot's version staged and loaded, both GPUs, a refresh. Returns the story."""
        done = []
        if not self.bound:
            done.append(self.step_binds())
        if not self.watched:  # an unbind moved them: a daemon-reload or an event may re-arm them on what was there then
            self.must("systemctl restart unbounded-nvidia-refresh.path")
            self.watched = True
            done.append("restart the path unit")
        if self.staged != self.base:
            done.append(self.step_stage())
        if self.module != self.base:
            done.append(self.step_module())
        for minor in sorted(set(range(len(UUIDS))) - self.gpus):
            done.append(self.step_gpu(minor))
        done.append(self.step_refresh())
        return done

    # -- after every step ----------------------------------------------------------------------------
    def check(self):
        """verify, then a pod; returns what they saw, in words."""
        rc, out = self.sh("unbounded-nvidia-setup verify --json 2>/dev/null")
        try:
            problems = [p["message"] for p in json.loads(out).get("problems", [])]
        except ValueError:
            raise AssertionError(f"verify --json printed no JSON ({rc}): {out[-800:]}")
        ready = rc == 0
        root, root_sums = self.root()
        ask = self.rng.choice(["all", "0"])
        report = self.pod(ask)
        live = self.bound and self.staged == self.module and bool(self.gpus) and self.fresh
        self.stats["ready"] += ready
        self.stats["live"] += live
        if ready:
            assert root == self.module, f"truthful: verify ready with the root at {root} under module {self.module}"
            gpus = sorted(self.gpus) if ask == "all" else sorted(self.gpus)[:1]  # =0: the first by PCI address
            nodes = CONTROL_NODES + [f"/dev/nvidia{g}" for g in gpus]
            try:
                self.case.assertGpuPod(report, root_sums, self.module, nodes=sorted(nodes))
            except AssertionError as e:
                raise AssertionError(f"truthful: verify ready, but the pod asking for nvidia.com/gpu={ask}: {e}") from None
        seen = self.one_driver(report, root)
        assert ready or not live, f"live: verify not ready though the host staged and loaded {self.module}, staging is bound, " \
                                  f"GPUs {sorted(self.gpus)} are there and a refresh ran since; its problems: {problems}"
        pod = f"refused (...{report['error'][-110:]})" if "error" in report else \
            f"{seen or 'no driver'}, {' '.join(n[5:] for n in parse(report)['nodes']) or 'no node'}"
        return f"verify {'ready' if ready else 'not ready'}{', live' if live else ''}; pod ={ask}: {pod}"

    def root(self):
        """The driver root's version (its manifest's) and its libcuda's and libnvidia-ml's sums, or
        (None, None) without one."""
        rc, out = self.sh(f"cat {MANIFEST}")
        if rc != 0:
            return None, None
        version = json.loads(out)["driver_version"]
        return version, self.must(f"sha256sum {ROOT}/lib/{ARCH}/libcuda.so.{version} {ROOT}/lib/{ARCH}/libnvidia-ml.so.{version}")

    def pod(self, ask):
        try:
            sandbox, container = self.node.pod("sequence", cdi=[f"nvidia.com/gpu={ask}"])
        except self.node.cri.grpc.RpcError as e:
            self.stats["refused pods"] += 1
            return {"error": f"{e.code()}: {e.details()}"}
        try:
            rc, out = self.node.exec(container, PROBE_ANY.replace("@ARCH@", ARCH))
        finally:
            self.node.remove(sandbox)
        return {"rc": rc, "out": out}

    def one_driver(self, report, root):
        """`one`: the versioned libraries a started pod got are one version's, the root's, the host's
        very files. Returns the version, or None when it got none."""
        if "error" in report:
            return None
        libs = {}
        for path, digest in parse(report)["sums"].items():
            m = re.fullmatch(r"lib(cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)", os.path.basename(path))
            assert m, f"one: the probe summed {path}"
            libs[os.path.basename(path)] = (m.group(2), digest)
        if not libs:
            return None
        self.stats["driver pods"] += 1
        versions = {v for v, _ in libs.values()}
        assert len(versions) == 1, f"one: a pod got libraries of {sorted(versions)}: {sorted(libs)}"
        version = versions.pop()
        assert sorted(libs) == [f"libcuda.so.{version}", f"libnvidia-ml.so.{version}"], f"one: a pod got only {sorted(libs)}"
        assert version == root, f"one: a pod got {version}, the driver root is {root}"
        for name, (_, digest) in libs.items():
            assert digest == sha256(self.case.hosts[version].p(f"{LIB}/nvidia/current/{name}")), \
                f"one: the pod's {name} is not the host's file"
        return version

    # -- the run -------------------------------------------------------------------------------------
    def run(self, seed, sequences=SEQUENCES, steps=STEPS):
        """The sequences; returns {"seed", "story", "failure" (None or the seed, the story so far and
        what failed), "stats", "seconds"}. Never raises: the boot must power off either way."""
        t0 = time.monotonic()
        self.rng = random.Random(seed)
        self.say(f"booted sequences: seed {seed} (STATEFUL_SEED={seed} replays it), {sequences} of {steps} steps")
        failure = None
        try:
            for s in range(1, sequences + 1):
                if s > 1:
                    self.at = f"back to ready before sequence {s}"
                    self.say(f"back to ready: {'; '.join(self.reset())}")
                self.at = f"the start of sequence {s}"
                self.say(f"sequence {s}, from {self.state()}: {self.check()}")
                for i in range(1, steps + 1):
                    name = self.rng.choice(self.KINDS)
                    self.at = f"{s}.{i} {name}"
                    what = getattr(self, f"step_{name}")()
                    self.stats["steps"] += 1
                    self.at = f"{s}.{i} {what}"
                    self.say(f"  {self.at} -> {self.check()}")
        except Exception as e:  # noqa: B902 -- reported with the story; the machine must still power off
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
            failure = (f"{detail}\nat {self.at}, with {self.state()}\nSTATEFUL_SEED={seed} replays it; the story before:\n"
                       + "\n".join(self.story))
            self.say(f"FAILED at {self.at}: {detail.splitlines()[0][:300] if detail else type(e).__name__}")
        seconds = time.monotonic() - t0
        self.say(f"booted sequences: {self.stats['steps']} steps in {seconds:.0f}s, verify ready after {self.stats['ready']}, "
                 f"live {self.stats['live']}, {self.stats['driver pods']} pods with a driver, {self.stats['refused pods']} refused")
        return {"seed": seed, "story": self.story, "failure": failure, "stats": self.stats, "seconds": seconds}


# make check's and CI's seed, in the tree as the stateful tier's CHECK_SEED: a run's verdict depends
# on the code alone, never on a draw. STATEFUL_SEED replays any other (make soak's fresh ones).
CHECK_SEED = 47


def run(case, node, staging, versions, staged):
    """The sequences in the booted machine of `case` (a TestCase instance of the tier), seeded by
    STATEFUL_SEED or CHECK_SEED."""
    seed = int(os.environ.get("STATEFUL_SEED") or CHECK_SEED)
    return BootedDay(case, node, staging, versions, staged).run(seed)
