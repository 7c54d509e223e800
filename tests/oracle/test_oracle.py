#!/usr/bin/env python3
"""verify held to the real CDI library, one-sidedly. For each Debian release whose containerd the
project meets (trixie: CDI library 0.8.0 with Go 1.24; sid: 1.0.1 with the newest Go), generated spec
directories (spec_cases.py) are given to `verify` on a fake machine that setup has made ready, and to
the library itself (cdi_oracle.go, built at test time from Debian's packages). Whenever the library
serves one of our devices from anything but our spec (another file, or none: a conflict), or panics,
verify must be not ready, naming a file of the case. verify does not model the library's decoding
(lib/consumer/foreign_spec.hpp): it may also say not ready where the library would serve ours (a file
naming our kind that the library refuses), which is counted and printed, never a difference. A
difference (a miss) prints the case as a story and is saved for tests/oracle/corpus/, whose cases run
first on every run. The containerd half puts the release's containerd into the machine root, where
verify asks it (`config dump`), and holds verify to that containerd run directly: whether it starts,
and with its CRI plugin, is its daemon's answer (started, and killed once it has booted), what it
does with CDI its dump's.

Budget, per release: ORACLE_CASES spec directories (2,000 in make check) and ORACLE_CONFIG_CASES
containerd layouts (700 in make check: each costs three runs of containerd, its daemon's boot the
dearest; in CI 0.2 s a layout where a spec directory costs 0.02 s, up to 0.35 s and 0.05 s with
compiles beside them; `make soak` draws 2,000 a round), from the fixed seed 44; ORACLE_SEED to
replay (printed every run; `random` for a fresh one), ORACLE_MINUTES for a soak (make soak) that
runs fresh seeds until the time is up."""

import base64
import glob
import json
import os
import queue
import random
import shutil
import tempfile
import time
import unittest

import concurrent.futures

from unbounded_tests import config_cases
from unbounded_tests import oracle as oracle_tools
from unbounded_tests import spec_cases
from unbounded_tests.harness import MachineRoot, main, write

BUILD_ROOT = os.environ.get("BUILD_ROOT", tempfile.gettempdir())
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
CASES = int(os.environ.get("ORACLE_CASES", "2000"))
CONFIG_CASES = int(os.environ.get("ORACLE_CONFIG_CASES", "700"))
MINUTES = float(os.environ.get("ORACLE_MINUTES", "0"))
CRI_17 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'


def oracle_seed():
    """ORACLE_SEED when set; in make check and CI a fixed seed (a run that fails there fails again
    on the same cases, never on luck); `make soak` asks for fresh ones (ORACLE_SEED=random)."""
    seed = os.environ.get("ORACLE_SEED", "44")
    return random.SystemRandom().randrange(1 << 32) if seed == "random" else int(seed)


def story(files, verify_res, oracle_res):
    lines = []
    for d, n, data, limit in files:
        text = data[:600].decode("utf-8", "replace") + (f"... ({len(data)} bytes)" if len(data) > 600 else "")
        lines.append(f"  /{d}/{n}{' (made past verify limits)' if limit else ''}:\n    " + text.replace("\n", "\n    "))
    lines.append(f"  verify: {json.dumps(verify_res)}")
    lines.append(f"  library: {json.dumps(oracle_res)}")
    return "\n".join(lines)


class Release:
    """One release's oracle and a machine whose verify is held to it. The CDI half's machine has
    containerd in dpkg's database but not its binary: verify then reads the CDI library's default
    directories, which are the cases', with a warning, and the 4,000 verify runs do not each ask
    containerd what the containerd half asks it 700 times a release."""

    install_containerd = False

    def __init__(self, test, release):
        self.test = test
        self.img = oracle_tools.image(release)
        out = os.path.join(BUILD_ROOT, "oracle", release)
        os.makedirs(out, exist_ok=True)
        self.oracle = oracle_tools.build_cdi_oracle(self.img, out)
        containerd = oracle_tools.version_of(self.img, "containerd")
        self.machine = self.new_machine(containerd)
        self.ours = sorted(os.listdir(self.machine.p("/etc/cdi")))
        self.cases_dir = tempfile.mkdtemp(prefix=f"unbounded-oracle-{release}-")
        test.addCleanup(shutil.rmtree, self.cases_dir, True)
        print(f"# {release}: containerd {containerd}, CDI library "
              f"{oracle_tools.version_of(self.img, 'golang-tags.cncf-container-device-interface-dev')}", flush=True)

    def new_machine(self, containerd):
        m = MachineRoot(self.test).standard()
        write(m.p("/var/lib/dpkg/status"), oracle_tools.package_paragraph(self.img, "containerd"))
        if self.install_containerd:
            m.install_containerd(containerd, binary=os.path.join(self.img, "usr/bin/containerd"))
        if containerd.startswith("1."):
            write(m.p("/etc/containerd/config.toml"), CRI_17)
        r = m.setup()
        self.test.assertEqual(r.returncode, 0, r.stderr)
        return m

    def place(self, files):
        m = self.machine
        shutil.rmtree(m.p("/var/run/cdi"), ignore_errors=True)
        for n in os.listdir(m.p("/etc/cdi")):
            if n not in self.ours:
                p = m.p(f"/etc/cdi/{n}")
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        for d, n, data, _ in files:
            os.makedirs(m.p(f"/{d}"), exist_ok=True)
            with open(m.p(f"/{d}/{n}"), "wb") as f:
                f.write(data)

    def verify(self):
        """{"ready": bool, "named": {path: the first words of each problem naming it}}."""
        r = self.machine.run("--json", "verify")
        res = json.loads(r.stdout)
        named = {}
        for p in res["problems"]:
            named.setdefault(p["path"], []).append(" ".join(p["message"].split()[:12]))
        return {"ready": r.returncode == 0 and res["outcome"] == "ready", "named": named}

    def copy_case(self, i, files):
        base = os.path.join(self.cases_dir, str(i))
        os.makedirs(os.path.join(base, "etc/cdi"))
        for n in self.ours:
            os.link(self.machine.p(f"/etc/cdi/{n}"), os.path.join(base, "etc/cdi", n))
        for d, n, data, _ in files:
            os.makedirs(os.path.join(base, d), exist_ok=True)
            with open(os.path.join(base, d, n), "wb") as f:
                f.write(data)
        return base

    def ours_served(self):
        """Our devices and the spec the library serves each from, with no other file there."""
        base = self.copy_case("ours", [])
        served = oracle_tools.run_cdi_oracle(self.oracle, [base])[base.rstrip("/")]
        shutil.rmtree(base)
        self.test.assertTrue(served and "panic" not in served, f"the library serves none of our devices: {served}")
        self.test.assertEqual(set(served.values()), {f"/etc/cdi/{n}" for n in self.ours}, served)
        return served

    def run(self, cases):
        """[(label, files)] -> list of difference stories (misses)."""
        ours = self.ours_served()
        verdicts, dirs = [], []
        for i, (label, files) in enumerate(cases):
            self.place(files)
            verdicts.append(self.verify())
            dirs.append(self.copy_case(i, files))
        library = oracle_tools.run_cdi_oracle(self.oracle, dirs)
        differences = []
        self.tally = {"ours-ready": 0, "elsewhere-not-ready": 0, "crash-not-ready": 0, "ours-not-ready": 0, "missed": 0}
        for (label, files), mine, d in zip(cases, verdicts, dirs):
            lib = library[d.rstrip("/")]
            case_paths = {f"/{fd}/{n}" for fd, n, _, _ in files}
            elsewhere = {q: lib.get(q) for q, path in ours.items() if lib.get(q) != path}
            # Not ready, naming a file of the case: nothing else of the machine changed.
            caught = not mine["ready"] and bool(case_paths & set(mine["named"]))
            if "panic" in lib or elsewhere:
                key = "crash-not-ready" if "panic" in lib else "elsewhere-not-ready"
                self.tally[key if caught else "missed"] += 1
                if not caught:
                    differences.append((label, files, story(files, mine, {**elsewhere, **({"panic": lib["panic"]} if "panic" in lib else {})})))
            else:
                self.tally["ours-not-ready" if not mine["ready"] else "ours-ready"] += 1
            shutil.rmtree(d)
        return differences


def corpus_cases():
    out = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.json"))):
        c = json.load(open(path))
        out.append((os.path.basename(path), [(f["dir"], f["name"], base64.b64decode(f["data"]), f["limit"]) for f in c["files"]]))
    return out


def save_difference(release, label, files):
    os.makedirs(os.path.join(BUILD_ROOT, "oracle", "differences"), exist_ok=True)
    path = os.path.join(BUILD_ROOT, "oracle", "differences", f"{release}-{label}.json")
    json.dump({"release": release, "files": [{"dir": d, "name": n, "data": base64.b64encode(data).decode(), "limit": limit}
                                             for d, n, data, limit in files]}, open(path, "w"), indent=1)
    return path


class DifferentialCdiLibrary(unittest.TestCase):
    """Misses only: `ours-not-ready` in the printed verdicts counts where verify errs toward not ready."""

    def check_release(self, release):
        rel = Release(self, release)
        seed = oracle_seed()
        deadline = time.monotonic() + MINUTES * 60
        total, differences, rounds = 0, [], 0
        while True:
            rng = random.Random(seed + rounds)
            cases = corpus_cases() if rounds == 0 else []
            cases += [(f"seed{seed + rounds}-case{i}", spec_cases.case(rng)) for i in range(CASES)]
            t0 = time.monotonic()
            found = rel.run(cases)
            total += len(cases)
            print(f"# {release}: seed {seed + rounds}: {len(cases)} cases in {time.monotonic() - t0:.1f} s, "
                  f"{len(found)} misses; verdicts {rel.tally}", flush=True)
            for label, files, text in found:
                differences.append(f"{label} (saved as {save_difference(release, label, files)}):\n{text}")
            rounds += 1
            if time.monotonic() >= deadline or differences:
                break
        print(f"# {release}: {total} cases in all", flush=True)
        self.assertGreaterEqual(total, CASES)
        self.assertEqual(differences[:5], [], f"{len(differences)} cases where the CDI library serves one of our devices "
                                              f"from another file or crashes and verify says ready (replay: ORACLE_SEED={seed})")

    def test_trixie_cdi_library_0_8(self):
        self.check_release("trixie")

    def test_sid_cdi_library_1_0(self):
        self.check_release("sid")


class ContainerdRelease(Release):
    """One release's containerd, and verify's reading of the same configuration files."""

    install_containerd = True
    MACHINES = 3  # verify asks containerd each time: three machines ask side by side

    def __init__(self, test, release):
        super().__init__(test, release)
        containerd = oracle_tools.version_of(self.img, "containerd")
        self.machines = [self.machine] + [self.new_machine(containerd) for _ in range(self.MACHINES - 1)]

    def verify_config(self, m, files):
        shutil.rmtree(m.p("/etc/containerd"), ignore_errors=True)
        for path, text in files.items():
            write(m.p("/" + path), text.replace(config_cases.ROOT, ""))
        r = m.run("--json", "verify")
        c = json.loads(r.stdout)["containerd"]
        if c.get("config_refused"):
            return {"refused": True, "why": c["config_refused"]}
        if c.get("config_ambiguous"):  # containerd itself reads it either way: verify says it cannot tell
            return {"refused": False, "ambiguous": True}
        cri = not c.get("cri_disabled") and not c.get("cri_fails")  # whether kubelet gets a runtime from it
        if c.get("cdi_table_disabled"):  # containerd's dump then has no table for enable_cdi
            return {"refused": False, "cri": cri, "enable_cdi": None, "cdi_spec_dirs": None}
        return {"refused": False, "cri": cri, "enable_cdi": c.get("cdi_enabled"), "cdi_spec_dirs": c.get("cdi_spec_dirs")}

    def run_configs(self, cases):
        dirs = []
        for i, (label, files) in enumerate(cases):
            base = os.path.join(self.cases_dir, f"c{i}")
            for path, text in files.items():
                write(os.path.join(base, path), text.replace(config_cases.ROOT, base))
            dirs.append(base)
        free = queue.Queue()
        for m in self.machines:
            free.put(m)

        def mine(files):
            m = free.get()
            try:
                return self.verify_config(m, files)
            finally:
                free.put(m)
        config = lambda b: os.path.join(b, "etc/containerd/config.toml")
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            verdicts = list(pool.map(mine, [files for _, files in cases]))
            dumps = list(pool.map(lambda b: oracle_tools.containerd_dump(self.img, config(b)), dirs))
            daemons = list(pool.map(lambda b: oracle_tools.containerd_daemon_starts(self.img, config(b), os.path.join(b, "d")), dirs))
        differences = []
        self.tally = {"refused": 0, "cdi-on": 0, "cdi-off": 0, "refused-by-the-daemon-only": 0, "no-cri": 0}
        for (label, files), mine, real, daemon, base in zip(cases, verdicts, dumps, daemons, dirs):
            # Whether containerd starts, and with its CRI plugin, is its daemon's answer (2.x's dump
            # passes over a missing import, where its daemon does not start; the CRI plugin refuses
            # some tables the dump prints); what it does with CDI, its dump's.
            refused = daemon["refused"]
            self.tally["refused-by-the-daemon-only" if refused and not real["refused"] else "refused" if refused
                       else "no-cri" if not daemon["cri"] else "cdi-on" if real["enable_cdi"] else "cdi-off"] += 1
            same = mine["refused"] == refused and (refused or mine.get("ambiguous") or (
                mine["cri"] == daemon["cri"] and
                mine["enable_cdi"] == real["enable_cdi"] and mine["cdi_spec_dirs"] == real["cdi_spec_dirs"]))
            if not same:
                text = "\n".join(f"  /{p}:\n    " + t.replace("\n", "\n    ") for p, t in sorted(files.items()))
                differences.append((label, files, f"{text}\n  verify: {json.dumps(mine)}\n  containerd: {json.dumps(real)}"
                                                  f"\n  its daemon: {json.dumps(daemon)}"))
            shutil.rmtree(base)
        return differences


def save_config_difference(release, label, files):
    os.makedirs(os.path.join(BUILD_ROOT, "oracle", "differences"), exist_ok=True)
    path = os.path.join(BUILD_ROOT, "oracle", "differences", f"containerd-{release}-{label}.json")
    json.dump({"release": release, "files": files}, open(path, "w"), indent=1)
    return path


def config_corpus():
    return [(os.path.basename(p), json.load(open(p))["files"]) for p in sorted(glob.glob(os.path.join(CORPUS, "containerd", "*.json")))]


class DifferentialContainerd(unittest.TestCase):
    """Issue 44, items 6-9: verify's reading of containerd's configuration held to `containerd config
    dump` of the release's own binary, on generated layouts (config_cases.py)."""

    def check_release(self, release):
        rel = ContainerdRelease(self, release)
        seed = oracle_seed()
        deadline = time.monotonic() + MINUTES * 60
        total, differences, rounds = 0, [], 0
        while True:
            rng = random.Random(seed + rounds)
            cases = config_corpus() if rounds == 0 else []
            cases += [(f"seed{seed + rounds}-case{i}", config_cases.case(rng)) for i in range(CONFIG_CASES)]
            t0 = time.monotonic()
            found = rel.run_configs(cases)
            total += len(cases)
            print(f"# containerd {release}: seed {seed + rounds}: {len(cases)} configurations in {time.monotonic() - t0:.1f} s, "
                  f"{len(found)} differences; containerd said {rel.tally}", flush=True)
            for label, files, text in found:
                differences.append(f"{label} (saved as {save_config_difference(release, label, files)}):\n{text}")
            rounds += 1
            if time.monotonic() >= deadline or differences:
                break
        self.assertGreaterEqual(total, CONFIG_CASES)
        self.assertEqual(differences[:5], [], f"{len(differences)} configurations where verify and containerd disagree "
                                              f"(replay: ORACLE_SEED={seed})")

    def test_trixie_containerd_1_7(self):
        self.check_release("trixie")

    def test_sid_containerd_2_1(self):
        self.check_release("sid")


if __name__ == "__main__":
    main()
