#!/usr/bin/python3
"""Driver discovery on a busy host's lib dir: 4,000 entries (the driver's libraries among unrelated ones), on
tmpfs, laid out as Ubuntu does (the libraries in the lib dir itself) and as Debian does (nvidia/current/
with the alternatives links beside it; a layout binaries before the alternatives support cannot read, so the baseline
runs on the Ubuntu one only).

Prints the median of setup's own `timings_ms.discover` over many unchanged re-runs, cold (the discovery
memo removed before each run: every directory listed and every library's ELF facts read) and warm (the
memo of the run before). With BASELINE_SETUP_BIN=<an older unbounded-nvidia-setup> the same runs of that
binary are interleaved with ours, so a change is compared with the binary before it in one session.

Usage: bench/discovery_bench.py [BUILD_DIR]   (run `make build` first)
"""

import json
import os
import statistics
import tempfile

from benchlib import scratch_base, timed
from unbounded_tests.harness import SETUP, V1, MachineRoot

RUNS = 41
ENTRIES = 4000


def machine(tmp, layout):
    m = MachineRoot(tmp=tmp)
    lib = m.stage_debian(V1) if layout == "debian" else m.stage_ubuntu(V1, unrelated=False)
    present = sum(len(files) + len(dirs) for _, dirs, files in os.walk(lib))
    m.add_unrelated(lib, ENTRIES - present - 3)  # add_unrelated adds 3 of its own
    m.stage_bin(V1)
    m.stage_firmware(V1)
    m.set_proc_version(V1)
    m.add_control_nodes()
    m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")
    return m


def discover_ms(binary, m, cold):
    if cold:
        try:
            os.unlink(m.p("/run/unbounded-nvidia/discovery-cache.json"))
        except FileNotFoundError:
            pass
    _, out = timed([binary, "--root", m.path, "--json", "setup"])
    return json.loads(out)["timings_ms"]["discover"]


def main():
    binaries = {"this build": SETUP}
    if os.environ.get("BASELINE_SETUP_BIN"):
        binaries["baseline"] = os.environ["BASELINE_SETUP_BIN"]
    for layout in ("ubuntu", "debian"):
        bench_layout(layout, binaries if layout == "ubuntu" else {"this build": SETUP})


def bench_layout(layout, binaries):
    with tempfile.TemporaryDirectory(dir=scratch_base()) as tmp:
        # A machine each: the two binaries' memos need not be of one format.
        machines = {name: machine(os.path.join(tmp, f"machine-{i}"), layout) for i, name in enumerate(binaries)}
        m = machines["this build"]
        entries = sum(len(files) + len(dirs) for _, dirs, files in os.walk(m.p("/run/host-nvidia/0")))
        print(f"Discovery on a {layout} lib dir of {entries} entries ({RUNS} runs each, median of timings_ms.discover):")
        for cold in (True, False):
            samples = {name: [] for name in binaries}
            for name, binary in binaries.items():
                discover_ms(binary, machines[name], cold)  # warm-up, and a root to be unchanged against
            for _ in range(RUNS):
                for name, binary in binaries.items():
                    samples[name].append(discover_ms(binary, machines[name], cold))
            label = "cold (no memo)" if cold else "warm (memo)"
            line = ", ".join(f"{name} {statistics.median(s):.3f} ms" for name, s in samples.items())
            if "baseline" in samples:
                line += f" ({statistics.median(samples['this build']) / statistics.median(samples['baseline']):.2f}x)"
            print(f"  {label}: {line}")


if __name__ == "__main__":
    main()
