#!/usr/bin/env python3
"""Issue 44: verify's picture of the CDI library, held to the real library. For each Debian release
whose containerd the project meets (trixie: CDI library 0.8.0 with Go 1.24; sid: 1.0.1 with the
newest Go), generated spec directories (spec_cases.py) are given to `verify` on a fake machine that
setup has made ready, and to the library itself (cdi_oracle.go, built at test time from Debian's
packages): for every device of ours, the spec file the library serves it from must be the one verify
says (cdi_resolution), or verify must name the file it could not judge, and only a file made to be
past its limits. A difference prints the case as a story and is saved for tests/oracle/corpus/,
whose cases run first on every run.

Budget: ORACLE_CASES per release (2,000 in make check), ORACLE_SEED to replay (printed every run),
ORACLE_MINUTES for a soak (make soak-oracle) that runs fresh seeds until the time is up."""

import base64
import glob
import json
import os
import random
import shutil
import tempfile
import time
import unittest

from unbounded_tests import oracle as oracle_tools
from unbounded_tests import spec_cases
from unbounded_tests.harness import MachineRoot, main, write

BUILD_ROOT = os.environ.get("BUILD_ROOT", tempfile.gettempdir())
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
CASES = int(os.environ.get("ORACLE_CASES", "2000"))
MINUTES = float(os.environ.get("ORACLE_MINUTES", "0"))
CRI_17 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'


def story(files, verify_res, unjudged, oracle_res):
    lines = []
    for d, n, data, limit in files:
        text = data[:600].decode("utf-8", "replace") + (f"... ({len(data)} bytes)" if len(data) > 600 else "")
        lines.append(f"  /{d}/{n}{' (made past verify limits)' if limit else ''}:\n    " + text.replace("\n", "\n    "))
    lines.append(f"  verify: {json.dumps(verify_res)} unjudged={unjudged}")
    lines.append(f"  library: {json.dumps(oracle_res)}")
    return "\n".join(lines)


class Release:
    """One release's oracle and a machine whose verify is held to it."""

    def __init__(self, test, release):
        self.test = test
        self.img = oracle_tools.image(release)
        out = os.path.join(BUILD_ROOT, "oracle", release)
        os.makedirs(out, exist_ok=True)
        self.oracle = oracle_tools.build_cdi_oracle(self.img, out)
        self.machine = MachineRoot(test).standard()
        m = self.machine
        write(m.p("/var/lib/dpkg/status"), oracle_tools.package_paragraph(self.img, "containerd"))
        containerd = oracle_tools.version_of(self.img, "containerd")
        if containerd.startswith("1."):
            write(m.p("/etc/containerd/config.toml"), CRI_17)
        r = m.setup()
        test.assertEqual(r.returncode, 0, r.stderr)
        self.ours = sorted(os.listdir(m.p("/etc/cdi")))
        self.cases_dir = tempfile.mkdtemp(prefix=f"unbounded-oracle-{release}-")
        test.addCleanup(shutil.rmtree, self.cases_dir, True)
        print(f"# {release}: containerd {containerd}, CDI library "
              f"{oracle_tools.version_of(self.img, 'golang-tags.cncf-container-device-interface-dev')}", flush=True)

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
        r = self.machine.run("--json", "verify")
        res = json.loads(r.stdout)
        unjudged = sorted(p["path"] for p in res["problems"] if p["message"].startswith("Cannot tell whether"))
        crashes = sorted(p["path"] for p in res["problems"] if "crashes the CDI library" in p["message"])
        return res.get("cdi_resolution", {}), unjudged, crashes

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

    def run(self, cases):
        """[(label, files)] -> list of difference stories."""
        verdicts, dirs = [], []
        for i, (label, files) in enumerate(cases):
            self.place(files)
            verdicts.append(self.verify())
            dirs.append(self.copy_case(i, files))
        library = oracle_tools.run_cdi_oracle(self.oracle, dirs)
        differences = []
        self.tally = {"shadowed": 0, "conflict": 0, "ours": 0, "unjudged": 0, "crash": 0}
        for (label, files), (res, unjudged, crashes), d in zip(cases, verdicts, dirs):
            # Our devices must be there to compare: an empty verdict would pass anything.
            self.test.assertEqual(len(res), 3, f"verify said nothing of our devices: {res}")
            served = set(res.values())
            self.tally["crash" if crashes else "unjudged" if unjudged else "conflict" if None in served else
                       "shadowed" if served - {"/etc/cdi/nvidia.yaml"} else "ours"] += 1
            lib = library[d.rstrip("/")]
            limits = {f"/{fd}/{n}" for fd, n, _, limit in files if limit}
            if "panic" in lib or crashes:
                # The library crashed on the case (containerd would): verify must say so, and only
                # then, or name what it could not judge (a file past its limits may be the crash).
                ok = "panic" in lib and (bool(crashes) or (bool(unjudged) and set(unjudged) <= limits))
            elif unjudged:
                ok = set(unjudged) <= limits
            else:
                ok = all(lib.get(q) == path for q, path in res.items())
            if not ok:
                differences.append((label, files, story(files, res, unjudged, {q: lib.get(q) for q in list(res) + ["panic"] if q in lib})))
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
    def check_release(self, release):
        rel = Release(self, release)
        seed = int(os.environ.get("ORACLE_SEED") or random.SystemRandom().randrange(1 << 32))
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
                  f"{len(found)} differences; verdicts {rel.tally}", flush=True)
            for label, files, text in found:
                differences.append(f"{label} (saved as {save_difference(release, label, files)}):\n{text}")
            rounds += 1
            if time.monotonic() >= deadline or differences:
                break
        print(f"# {release}: {total} cases in all", flush=True)
        self.assertGreaterEqual(total, CASES)
        self.assertEqual(differences[:5], [], f"{len(differences)} cases where verify and the CDI library disagree "
                                              f"(replay: ORACLE_SEED={seed})")

    def test_trixie_cdi_library_0_8(self):
        self.check_release("trixie")

    def test_sid_cdi_library_1_0(self):
        self.check_release("sid")


if __name__ == "__main__":
    main()
