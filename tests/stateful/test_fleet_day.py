#!/usr/bin/env python3
"""Issue 47: a fleet's day in sequences. A hypothesis RuleBasedStateMachine drives the real binaries on a
fake machine root through host events (a driver staged, half-upgraded or unbound, another kernel module,
GPUs coming and going) and machine actions (setup, refresh, verify, each also SIGKILLed at a drawn
system call), and after every step checks what must hold whatever the order:

  root      the driver root is one complete tree as its manifest says (old or new, never mixed)
  spec      every hostPath of our spec exists, and the spec serves the root's version
  truthful  verify exits 0 only when pods can work: the root is the loaded module's version, the spec
            offers exactly the GPUs the machine has, every hostPath exists
  live      setup and an unkilled refresh succeed, and verify is ready, when the host staged the module's
            version completely and a GPU is there
  clean     a successful run leaves no temporary tree or spec behind
  untouched nothing outside our own paths changed (staging, /proc, /dev)

A failure shrinks to the shortest sequence; hypothesis prints it as a story of steps, and it is kept in
tests/stateful/examples/ (the example database, in the repository: every run replays what failed
before). STATEFUL_SEED picks the seed (printed each run); STATEFUL_EXAMPLES and STATEFUL_STEPS the budget;
STATEFUL_MINUTES runs fresh seeds until the time is up (make soak)."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import unittest

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from unbounded_tests.harness import SETUP, V1, V2, MachineRoot, fixture, main, preload_env, snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
STATS = {"sequences": 0, "steps": 0, "runs": 0}
EXAMPLES = os.path.join(HERE, "examples")
VERSIONS = (V1, V2)
MINORS = range(3)
SPEC = "/etc/cdi/nvidia.yaml"
# A deliberately broken build (tests/README.md): "verify-ignores-module" runs verify with the kernel
# module's version hidden from it (tests/fixtures/hide_module_shim.cpp).
BROKEN = os.environ.get("STATEFUL_BROKEN", "")


# Where a run may be killed: any system call early, or the calls of the copy, the swap and the spec's
# write late in the run (inject=all alone would only ever stop the first few dozen calls).
KILLS = st.none() | st.tuples(st.just("all"), st.integers(min_value=1, max_value=40)) | st.tuples(
    st.sampled_from(["copy_file_range,sendfile,write", "fsync,fdatasync,syncfs", "renameat2,renameat,rename", "unlinkat,rmdir",
                     "symlinkat,linkat,mkdirat"]),
    st.integers(min_value=1, max_value=12))


def uuid(minor):
    return f"GPU-{minor:08x}-1111-2222-3333-444455556666"


def bus(minor):
    return f"0000:{0x18 + minor:02x}:00.0"


class FleetDay(RuleBasedStateMachine):
    @initialize()
    def machine(self):
        self.m = MachineRoot()
        self.m.add_control_nodes()
        # No waiting: a host that has not staged is an event of its own here, not something to wait out.
        self.m.config("staging_timeout: 0s\nrefresh:\n  settle_time: 0s\n  settle_limit: 0s\n")
        self.staged = None  # the version staged completely, "half", or None
        self.module = None
        self.gpus = set()
        STATS["sequences"] += 1

    def teardown(self):
        self.m.cleanup()

    # -- the host --------------------------------------------------------------------------------
    @rule(version=st.sampled_from(VERSIONS))
    def host_stages(self, version):
        self.m.clear_staging()
        self.m.stage_all(version, unrelated=False)
        self.staged = version

    @rule(version=st.sampled_from(VERSIONS))
    def host_half_upgrade(self, version):
        """libcuda of `version` beside a libnvidia-ml of the other: a host caught mid-upgrade."""
        self.m.clear_staging()
        self.m.stage_all(version, unrelated=False)
        other = V2 if version == V1 else V1
        d = self.m.p("/run/host-nvidia/0")
        os.rename(os.path.join(d, f"libnvidia-ml.so.{version}"), os.path.join(d, f"libnvidia-ml.so.{other}"))
        self.staged = "half"

    @rule()
    def host_unbinds_staging(self):
        self.m.clear_staging()
        self.staged = None

    @rule(version=st.sampled_from(VERSIONS))
    def host_loads_module(self, version):
        self.m.set_proc_version(version)
        self.module = version

    @rule(minor=st.sampled_from(MINORS))
    def gpu_arrives(self, minor):
        if os.path.lexists(self.m.p(f"/dev/nvidia{minor}")):
            os.unlink(self.m.p(f"/dev/nvidia{minor}"))
        self.m.add_gpu(minor, bus(minor), uuid(minor))
        self.gpus.add(minor)

    @rule(minor=st.sampled_from(MINORS))
    def gpu_falls_off(self, minor):
        shutil.rmtree(self.m.p(f"/proc/driver/nvidia/gpus/{bus(minor)}"), ignore_errors=True)
        if os.path.lexists(self.m.p(f"/dev/nvidia{minor}")):
            os.unlink(self.m.p(f"/dev/nvidia{minor}"))
        self.gpus.discard(minor)

    # -- the machine -----------------------------------------------------------------------------
    def run(self, *args, kill_at=None):
        """kill_at: (system calls, N): SIGKILL at the N-th call of whichever of them gets there first."""
        cmd = [SETUP, "--root", self.m.path, *args]
        env = MachineRoot.run_env()
        if BROKEN == "verify-ignores-module" and "verify" in args:
            env.update(preload_env(fixture("hide_module_shim.so")))
        if kill_at is not None:
            # SIGKILL at the kill_at-th call of whichever system call gets there first: deterministic, so
            # that a failure shrinks and replays.
            calls, n = kill_at
            cmd = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"inject={calls}:signal=KILL:when={n}", *cmd]
        STATS["runs"] += 1
        before = self.outside()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        after = self.outside()
        assert before == after, f"untouched: {' '.join(args)} changed staging, /proc or /dev"
        return r

    def outside(self):
        """Staging, /proc and /dev, without /dev/char: its major:minor links to the driver's nodes are
        setup's own (as nvidia-ctk's create-dev-char-symlinks makes them, lib/cdi/dev_char.hpp)."""
        out = {p: snapshot(self.m.p(p)) for p in ("/run/host-nvidia", "/proc", "/dev")}
        out["/dev"] = {k: v for k, v in (out["/dev"] or {}).items() if k != "char" and not k.startswith("char/")}
        return out

    def can_go_live(self):
        return self.staged in VERSIONS and self.staged == self.module and bool(self.gpus)

    @rule(kill_at=KILLS)
    def boot_setup(self, kill_at):
        r = self.run("setup", kill_at=kill_at)
        if kill_at is None:
            self.after_run("setup", r)

    @rule(kill_at=KILLS)
    def refresh(self, kill_at):
        r = self.run("refresh", kill_at=kill_at)
        if kill_at is None:
            self.after_run("refresh", r)

    def after_run(self, verb, r):
        if self.can_go_live():
            assert r.returncode == 0, f"live: {verb} failed though the host staged the module's version {self.module}: {r.stderr[-600:]}"
            v = self.run("--json", "verify")
            assert v.returncode == 0, f"live: verify after a good {verb} is not ready: {v.stdout[-800:]}"
        if r.returncode == 0:
            leftovers = [n for n in os.listdir(self.m.p("/run/nvidia")) if n != "driver"] if os.path.isdir(self.m.p("/run/nvidia")) else []
            leftovers += [n for n in os.listdir(self.m.p("/etc/cdi")) if not n.endswith(".yaml")] if os.path.isdir(self.m.p("/etc/cdi")) else []
            assert not leftovers, f"clean: {verb} left {leftovers}"

    @rule()
    def verify(self):
        self.check_truthful()

    # -- what must hold after every step -----------------------------------------------------------
    def manifest(self):
        path = os.path.join(self.m.driver_root(), ".unbounded-manifest.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    @invariant()
    def root_is_one_complete_tree(self):
        STATS["steps"] += 1
        root = self.m.driver_root()
        if not os.path.lexists(root):
            return
        doc = self.manifest()
        assert doc is not None, "root: a driver root without its manifest"
        want = {e["path"] for e in doc["entries"]}
        for e in doc["entries"]:
            p = os.path.join(root, e["path"])
            if e["type"] == "file":
                assert os.path.isfile(p) and not os.path.islink(p), f"root: {e['path']} missing"
                assert os.path.getsize(p) == e["size"], f"root: {e['path']} has another size than its manifest says"
            elif e["type"] == "link":
                assert os.readlink(p) == e["target"], f"root: {e['path']} points elsewhere"
        have = set()
        for dirpath, dirnames, filenames in os.walk(root):
            for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                have.add(os.path.relpath(os.path.join(dirpath, n), root))
        extra = have - want - {".unbounded-manifest.json"}
        assert not extra, f"root: files the manifest does not name: {sorted(extra)[:5]}"
        versions = {m.group(1) for p in want for m in [re.search(r"\.so\.(\d{3}\.\d+(?:\.\d+)?)$", p)] if m}
        assert versions <= {doc["driver_version"]}, f"root: mixed versions {versions}"

    @invariant()
    def spec_paths_exist(self):
        spec = self.m.p(SPEC)
        if not os.path.exists(spec):
            return
        with open(spec) as f:
            text = f.read()
        for host_path in re.findall(r"hostPath: (\S+)", text):
            assert os.path.lexists(self.m.p(host_path)), f"spec: hostPath {host_path} does not exist"
        doc = self.manifest()
        if doc is not None:
            assert f"libcuda.so.{doc['driver_version']}" in text, "spec: it does not serve the root's version"

    def check_truthful(self):
        v = self.run("--json", "verify")
        if v.returncode != 0:
            return
        doc = self.manifest()
        assert doc is not None, "truthful: verify ready without a driver root"
        if self.module is not None:
            assert doc["driver_version"] == self.module, f"truthful: verify ready with root {doc['driver_version']} under module {self.module}"
        with open(self.m.p(SPEC)) as f:
            offered = set(re.findall(r"name: (GPU-[0-9a-f-]{36})", f.read()))
        assert offered == {uuid(g) for g in self.gpus}, f"truthful: verify ready but the spec offers {sorted(offered)}, the machine has {sorted(self.gpus)}"


def budget():
    return settings(max_examples=int(os.environ.get("STATEFUL_EXAMPLES", "600")),
                    stateful_step_count=int(os.environ.get("STATEFUL_STEPS", "25")),
                    deadline=None, database=DirectoryBasedExampleDatabase(EXAMPLES),
                    suppress_health_check=list(HealthCheck), print_blob=True,
                    phases=[p for p in Phase if p != Phase.shrink or os.environ.get("STATEFUL_SHRINK", "1") == "1"])


class TestStories(unittest.TestCase):
    """Shrunk stories, replayed step by step in every run: each once failed (tests/README.md says when)."""

    def replay(self, steps):
        state = FleetDay()
        state.machine()
        try:
            for name, kwargs in steps:
                getattr(state, name)(**kwargs)
                state.root_is_one_complete_tree()
                state.spec_paths_exist()
        finally:
            state.teardown()

    def test_the_broken_build_s_story_is_caught(self):
        """The tier can fail: verify with the kernel module hidden from it (the deliberately broken build)
        says ready on a root the loaded module cannot use, and the truthful invariant says so."""
        global BROKEN
        story = [("host_stages", {"version": V1}), ("gpu_arrives", {"minor": 0}), ("boot_setup", {"kill_at": None}),
                 ("host_loads_module", {"version": V2}), ("verify", {})]
        self.replay(story)  # the real build: ready is never said
        BROKEN, saved = "verify-ignores-module", BROKEN
        try:
            with self.assertRaisesRegex(AssertionError, f"truthful: verify ready with root {V1} under module {V2}"):
                self.replay(story)
        finally:
            BROKEN = saved


class TestFleetDay(unittest.TestCase):
    def test_sequences(self):
        minutes = float(os.environ.get("STATEFUL_MINUTES", "0"))
        end = time.monotonic() + minutes * 60
        rounds = 0
        while True:
            seed = int(os.environ.get("STATEFUL_SEED") or random.SystemRandom().randrange(2**32)) if rounds == 0 and not minutes \
                else random.SystemRandom().randrange(2**32)
            print(f"# stateful seed {seed} (STATEFUL_SEED={seed} replays it)", flush=True)
            case = FleetDay.TestCase
            case.settings = budget()
            from hypothesis import seed as with_seed
            with_seed(seed)(FleetDay)  # the machine class is where hypothesis' stateful runner reads it
            case("runTest").runTest()
            rounds += 1
            if time.monotonic() >= end:
                break
        print(f"# {rounds} round(s): {STATS['sequences']} sequences, {STATS['steps']} steps, {STATS['runs']} runs of the binaries", flush=True)


if __name__ == "__main__":
    main()
