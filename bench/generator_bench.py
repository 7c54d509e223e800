#!/usr/bin/python3
"""Benchmark of unbounded-nvidia-generator: median wall time per process over 300 runs, on the GPU
machine with licensing configured (the case that writes the most), each run into a fresh directory
as systemd gives it.

Usage: bench/generator_bench.py [BUILD_DIR]   (run `make build` first)
"""

import os
import shutil
import statistics
import tempfile

from benchlib import ENV, HERE, scratch_base, timed
from unbounded_tests.harness import GENERATOR

RUNS = 300


def main():
    tmp = tempfile.mkdtemp(prefix="unbounded-gen-bench-", dir=scratch_base())
    try:
        root = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(HERE, "..", "tests", "generator", "04-licensing-configured", "input"), root)
        env = dict(ENV, UNBOUNDED_NVIDIA_ROOT=root)
        wall = []
        for i in range(RUNS):
            out = os.path.join(tmp, f"out{i}")
            os.makedirs(out)
            t, _ = timed([GENERATOR, out, out, out], env)
            wall.append(t)
        baseline = [timed(["/bin/true"])[0] for _ in range(RUNS)]
        print(f"generator, GPU machine with licensing: {len(os.listdir(os.path.join(tmp, 'out0')))} entries written; "
              f"medians of {RUNS} runs")
        print(f"per process:            {statistics.median(wall) * 1000:6.2f} ms   (target <= 2 ms)")
        print(f"/bin/true, for scale:   {statistics.median(baseline) * 1000:6.2f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
