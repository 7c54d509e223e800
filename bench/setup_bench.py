#!/usr/bin/python3
"""Benchmark of `unbounded-nvidia-setup setup` on a driver tree of about 160 MB.

Prints: a full setup against `cp -L` of the same files, an unchanged re-run against the full setup,
a refresh that finds nothing changed against the unchanged re-run (with the default configuration:
the bench first lets staging age past the default settle time, as it has on a running machine), and the setup process's peak RSS (VmHWM, as setup reports it in its --json result). Figures are medians of several runs on tmpfs (the driver root's
file system in production), with the staging files already in the page cache, as they are on a host.

Usage: bench/setup_bench.py [BUILD_DIR]   (run `make build` first)
With BASELINE_SETUP_BIN=<an older unbounded-nvidia-setup>, its unchanged re-run on the same tree is
measured too, interleaved, so a change can be compared with the binary before it in one session.
"""

import json
import os
import shutil
import statistics
import tempfile
import time

from benchlib import ENV, scratch_base, timed
from harness import SETUP, V1, MachineRoot

RUNS = 21
PADDING_MB = {"libcuda": 70, "libnvidia-glcore": 40, "libnvidia-eglcore": 20, "libnvidia-ptxjitcompiler": 25}


def main():
    base = scratch_base()
    tmp = tempfile.mkdtemp(prefix="unbounded-bench-", dir=base)
    try:
        m = MachineRoot(tmp=os.path.join(tmp, "machine"))
        m.standard(V1, extra_unrelated=3000)
        for lib, mb in PADDING_MB.items():
            with open(m.p(f"/run/host-nvidia/0/{lib}.so.{V1}"), "ab") as f:
                f.write(os.urandom(mb << 20))
        cmd = [SETUP, "--root", m.path, "--json", "setup"]
        refresh = [SETUP, "--root", m.path, "--json", "refresh"]
        baseline_bin = os.environ.get("BASELINE_SETUP_BIN")
        baseline = [baseline_bin, "--root", m.path, "--json", "setup"] if baseline_bin else None

        # One warm-up run, then the list of files it copied (the manifest's sources) for cp -L.
        timed(cmd)
        manifest = json.load(open(os.path.join(m.driver_root(), ".unbounded-manifest.json")))
        sources = [m.p(e["source"]) for e in manifest["entries"] if e["type"] == "file"]
        total_bytes = sum(e["size"] for e in manifest["entries"] if e["type"] == "file")

        # Staging as on a running machine: quiet for longer than the default settle time (10 s).
        time.sleep(max(0.0, 10.5 - (time.time() - os.stat(m.p("/run/host-nvidia/0")).st_ctime)))
        full, rerun, noop, base_rerun, cp, rss = [], [], [], [], [], []
        for _ in range(RUNS):
            shutil.rmtree(m.driver_root())
            t, out = timed(cmd)
            res = json.loads(out)
            assert res["bytes_copied"] == total_bytes, res
            full.append(t)
            rss.append(res["peak_rss_kib"])
            t, out = timed(cmd)
            res = json.loads(out)
            assert res["bytes_copied"] == 0, res
            rerun.append(t)
            rss.append(res["peak_rss_kib"])
            t, out = timed(refresh)
            res = json.loads(out)
            assert res["outcome"] == "ready" and res["bytes_copied"] == 0 and res["settle_waited_ms"] == 0, res
            noop.append(t)
            if baseline:
                t, out = timed(baseline)
                assert json.loads(out)["bytes_copied"] == 0
                base_rerun.append(t)
            dest = os.path.join(tmp, "cp")
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            t, _ = timed(["cp", "-L", *sources, dest])
            cp.append(t)

        f, r, c, n = statistics.median(full), statistics.median(rerun), statistics.median(cp), statistics.median(noop)
        print(f"tree: {len(sources)} driver files, {total_bytes / 2**20:.1f} MiB, among "
              f"{len(os.listdir(m.p('/run/host-nvidia/0')))} entries of a host lib dir; "
              f"{'tmpfs (/dev/shm)' if base else 'the default temp dir'}; medians of {RUNS} runs")
        print(f"full setup:           {f * 1000:8.1f} ms")
        print(f"cp -L of same files:  {c * 1000:8.1f} ms   full/cp = {f / c:.2f}  (target <= 1.2)")
        print(f"unchanged re-run:     {r * 1000:8.1f} ms   re-run/full = {100 * r / f:.1f} %  (target <= 5 %)")
        print(f"refresh, no change:   {n * 1000:8.1f} ms   refresh/re-run = {n / r:.2f}  (target <= 1.0)")
        if base_rerun:
            b = statistics.median(base_rerun)
            print(f"baseline re-run:      {b * 1000:8.1f} ms   refresh/baseline re-run = {n / b:.2f}  ({baseline_bin})")
        print(f"peak RSS of setup:    {max(rss) / 1024:8.1f} MiB   (target <= 16 MiB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
