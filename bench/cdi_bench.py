#!/usr/bin/python3
"""Benchmark of `unbounded-nvidia-setup generate-cdi` for a machine with 8 GPUs, and for one whose 8 GPUs
have 7 MIG instances each and 4 IMEX channels.

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


def bench(label, machine):
    tmp = tempfile.mkdtemp(prefix="unbounded-cdi-bench-", dir=scratch_base())
    try:
        m = MachineRoot(tmp=os.path.join(tmp, "machine"))
        machine(m)
        timed([SETUP, "--root", m.path, "setup"])
        out = m.p("/tmp/spec.yaml")
        os.makedirs(os.path.dirname(out))
        inproc, wall = [], []
        for _ in range(RUNS):
            t, stdout = timed([SETUP, "--root", m.path, "--json", "generate-cdi", "--output", out])
            res = json.loads(stdout)
            wall.append(t)
            inproc.append(res["timings_ms"]["total"])
        print(f"generate-cdi, {label}: {res['cdi_devices']} devices, {res['cdi_device_nodes']} device nodes, "
              f"{res['cdi_mounts']} mounts, cdiVersion {res['cdi_version']}; medians of {RUNS} runs")
        print(f"  in-process (enumerate, generate, write): {statistics.median(inproc):6.2f} ms   (target <= 2 ms)")
        print(f"  whole process (spawn to exit):           {statistics.median(wall) * 1000:6.2f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def eight_gpus(m):
    m.standard(V1, gpus=8)


def eight_gpus_mig_imex(m):
    m.standard(V1, gpus=8)
    for g in range(8):
        m.add_mig(g, {gi: [0] for gi in range(7, 14)})
    m.add_imex_channels(range(4))


def main():
    bench("8 GPUs", eight_gpus)
    bench("8 GPUs x 7 MIG + 4 IMEX channels", eight_gpus_mig_imex)


if __name__ == "__main__":
    main()
