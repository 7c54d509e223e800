#!/usr/bin/python3
"""Benchmark of `unbounded-nvidia-setup generate-cdi` for a machine with 8 GPUs.

Prints the in-process generation time (the command's own timings_ms.total: device enumeration,
spec generation and the atomic write) and the wall time per process, medians of 50 runs, with the
spec's device, device node and mount counts.

Usage: bench/cdi_bench.py [BUILD_DIR]   (run `make build` first)
"""

import json
import os
import shutil
import statistics
import tempfile

from benchlib import scratch_base, timed
from harness import SETUP, V1, MachineRoot

RUNS = 50


def main():
    tmp = tempfile.mkdtemp(prefix="unbounded-cdi-bench-", dir=scratch_base())
    try:
        m = MachineRoot(tmp=os.path.join(tmp, "machine"))
        m.standard(V1, gpus=8)
        timed([SETUP, "--root", m.path, "setup"])
        out = m.p("/tmp/spec.yaml")
        os.makedirs(os.path.dirname(out))
        inproc, wall = [], []
        for _ in range(RUNS):
            t, stdout = timed([SETUP, "--root", m.path, "--json", "generate-cdi", "--output", out])
            res = json.loads(stdout)
            wall.append(t)
            inproc.append(res["timings_ms"]["total"])
        print(f"generate-cdi, 8 GPUs: {res['cdi_devices']} devices, {res['cdi_device_nodes']} device nodes, "
              f"{res['cdi_mounts']} mounts, cdiVersion {res['cdi_version']}; medians of {RUNS} runs")
        print(f"in-process (enumerate, generate, write): {statistics.median(inproc):6.2f} ms   (target <= 2 ms)")
        print(f"whole process (spawn to exit):           {statistics.median(wall) * 1000:6.2f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
