#!/usr/bin/python3
"""Records which functions of unbounded-nvidia-setup run on the boot path and writes them, as the
linker's input-section names, to oneshot/hot-text.order.

Why: the kernel maps a program's text 64 KiB around each page it touches (fault-around), so a
process's RSS counts nearly every 64 KiB window its code touches, not the code it runs. Linked in
source order, the ~0.9 MB of functions a setup runs are spread over all of the ~2.3 MB of text and
almost all of it becomes resident. oneshot/meson.build links setup with gold's
--section-ordering-file, which puts these functions first and together (bench/README.md has the
figures). A function missing from the list still works; it is only placed with the cold code.

What runs: on a bench machine (8 GPUs x 7 MIG, 4 IMEX channels), a first setup, an unchanged re-run
(with and without --json, as systemd and the host's reconcile loop run it), a refresh that finds
nothing changed, and verify; each under valgrind's lackey, whose instruction trace is mapped to the
symbols of the binary it ran.

Usage: bench/hot_text.py [BUILD_DIR]   (needs valgrind; run `make build` first)
Re-run it after a change that adds or renames functions on the boot path; the unit tier's
unit-hot-text check fails when the list has gone stale (tests/unit/test_hot_text.py).
"""

import bisect
import glob
import os
import shutil
import subprocess
import tempfile
import time

from benchlib import BUILD, ENV, HERE, scratch_base
from unbounded_tests.harness import SETUP, V1, MachineRoot

ORDER_FILE = os.path.join(HERE, "..", "oneshot", "hot-text.order")

# valgrind loads a position-independent executable at this address on amd64 and arm64; checked
# below against the program's entry point, which every run executes.
VALGRIND_PIE_BASE = 0x108000

# The sections no list can name one by one: static constructors (one .text.startup per object)
# and main.
ALWAYS_FIRST = [".text.startup", ".text.startup.*"]


def function_symbols(binary):
    """(start, size, mangled name) of each function in the binary, sorted by start."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTwW":
            syms.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    return sorted(syms)


def entry_point(binary):
    out = subprocess.run(["readelf", "-hW", binary], check=True, capture_output=True, text=True).stdout
    return next(int(line.split()[-1], 16) for line in out.splitlines() if "Entry point address" in line)


def executed_addresses(cmd):
    """The instruction addresses one run executes: lackey logs "I  addr,size" per instruction (to a
    file, apart from the program's own output)."""
    with tempfile.NamedTemporaryFile(prefix="hot-text-", suffix=".trace") as trace:
        subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={trace.name}", *cmd],
                       env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        addresses = set()
        with open(trace.name, "rb") as f:
            for line in f:
                if line.startswith(b"I "):
                    addresses.add(int(line[2:].split(b",")[0], 16))
    return addresses


def cold_functions(build):
    """The functions GCC put in .text.unlikely.<name> whole: the ones declared [[gnu::cold]] (errors
    are made on the boot path too, for a probe that finds nothing). A function only split by GCC has
    both .text.<name> and .text.unlikely.<name> (its .cold part)."""
    cold = set()
    for obj in glob.glob(os.path.join(build, "**", "*.o"), recursive=True):
        out = subprocess.run(["readelf", "-SW", obj], check=True, capture_output=True, text=True).stdout
        sections = {field for line in out.splitlines() for field in line.split() if field.startswith(".text.")}
        cold |= {s[len(".text.unlikely."):] for s in sections
                 if s.startswith(".text.unlikely.") and ".text." + s[len(".text.unlikely."):] not in sections}
    return cold


def section_of(name, cold):
    """The input section GCC's -ffunction-sections put a function in."""
    if name.endswith(".cold"):
        return ".text.unlikely." + name[: -len(".cold")]
    return (".text.unlikely." if name in cold else ".text.") + name


def main():
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is needed: apt-get install valgrind")
    syms = function_symbols(SETUP)
    starts = [s[0] for s in syms]
    base = scratch_base()
    tmp = tempfile.mkdtemp(prefix="unbounded-hot-text-", dir=base)
    try:
        m = MachineRoot(tmp=os.path.join(tmp, "machine"))
        m.standard(V1, gpus=8, extra_unrelated=3000)
        for g in range(8):
            m.add_mig(g, {gi: [0] for gi in range(7, 14)})
        m.add_imex_channels(range(4))
        root = ["--root", m.path]
        runs = [[SETUP, *root, "--json", "setup"], [SETUP, *root, "--json", "setup"], [SETUP, *root, "setup"]]
        addresses = set()
        for cmd in runs:
            addresses |= executed_addresses(cmd)
        # A refresh finds nothing changed only once staging is older than the settle time (10 s).
        time.sleep(max(0.0, 10.5 - (time.time() - os.stat(m.p("/run/host-nvidia/0")).st_ctime)))
        for cmd in ([SETUP, *root, "--json", "refresh"], [SETUP, *root, "refresh"],
                    [SETUP, *root, "--json", "verify"], [SETUP, *root, "verify"]):
            addresses |= executed_addresses(cmd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if VALGRIND_PIE_BASE + entry_point(SETUP) not in addresses:
        raise SystemExit(f"the entry point of {SETUP} is not in the trace: valgrind loaded it elsewhere")
    hot = set()
    for address in addresses:
        offset = address - VALGRIND_PIE_BASE
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and syms[i][0] <= offset < syms[i][0] + syms[i][1]:
            hot.add(syms[i][2])
    cold = cold_functions(BUILD)
    sections = ALWAYS_FIRST + sorted({section_of(name, cold) for name in hot} - set(ALWAYS_FIRST))
    with open(ORDER_FILE, "w") as f:
        f.write("".join(s + "\n" for s in sections))
    total = sum(size for _, size, name in syms if name in hot)
    print(f"{len(hot)} functions, {total / 1024:.0f} KiB of {sum(s[1] for s in syms) / 1024:.0f} KiB of text, "
          f"in {os.path.relpath(ORDER_FILE)}")


if __name__ == "__main__":
    main()
