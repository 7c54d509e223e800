#!/usr/bin/python3
"""Records which functions of unbounded-nvidia-setup run on its boot path and writes
oneshot/hot-text.ld, the linker script that puts them together in an output section of their own,
.text.boot.

Why: with the page cache warm the kernel maps a file's pages 64 KiB around each page a process
faults on (fault-around), so a process's RSS counts every 64 KiB window of text it touches, not the
code it runs. Linked in source order, the ~1.1 MiB of functions a setup runs are spread over all of
the ~2.3 MiB of text and nearly all of it is resident. oneshot/meson.build adds this script to the
default one (INSERT BEFORE .text: GNU ld keeps its own layout, segments and hardening; only these
input sections move); bench/README.md has the figures. A function missing from the list still
works; it only lies with the cold code again.

What runs: on a bench machine (8 GPUs x 7 MIG, 4 IMEX channels), a first setup, an unchanged re-run
(with and without --json, as systemd and the host's reconcile loop run it), a refresh that finds
nothing changed, and verify; each under valgrind's lackey, whose instruction trace (read from a FIFO,
never stored) is mapped to the symbols of the binary it ran, and each function to the input section
that holds it in the objects and archives the binary is linked from.

Usage: bench/hot_text.py [BUILD_DIR]   (needs valgrind; run `make build` first; about 2 minutes)
Re-run it after a change that adds or renames functions on the boot path; the unit tier's
unit-hot-text check fails when the list has gone stale (tests/unit/test_hot_text.py).
"""

import bisect
import os
import shlex
import shutil
import subprocess
import tempfile
import time

from benchlib import BUILD, ENV, HERE, scratch_base
from unbounded_tests.harness import SETUP, V1, MachineRoot

SCRIPT = os.path.join(HERE, "..", "oneshot", "hot-text.ld")
TARGET = "oneshot/unbounded-nvidia-setup"

# valgrind loads a position-independent executable at this address; checked below against the
# program's entry point, which every run executes.
VALGRIND_PIE_BASE = 0x108000

# What no list names one by one: the static constructors (a .text.startup in each object, and main).
STARTUP = "*(.text.startup .text.startup.*)"


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


def link_inputs():
    """The objects and archives the build links setup from (its link command), with the static
    libstdc++ that -static-libstdc++ adds."""
    out = subprocess.run(["ninja", "-C", BUILD, "-t", "commands", TARGET], check=True, capture_output=True, text=True).stdout
    words = shlex.split(out.strip().splitlines()[-1])
    inputs = [w if os.path.isabs(w) else os.path.join(BUILD, w) for w in words if w.endswith((".o", ".a"))]
    libstdcxx = subprocess.run([words[0], "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    return inputs + ([libstdcxx] if os.path.isabs(libstdcxx) else [])


def text_sections(inputs):
    """Every .text.* input section name in these objects and archives."""
    names = set()
    for path in inputs:
        out = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True).stdout
        names |= {field for line in out.splitlines() for field in line.split() if field.startswith(".text.")}
    return names


def section_of(name, sections):
    """The input section that holds function `name`: .text.<name> (-ffunction-sections), a split
    function's .cold part in .text.unlikely.<name>, a function declared [[gnu::cold]] whole in
    .text.unlikely.<name>. None when it has no section of its own: crt's _start, the static
    constructors and main (STARTUP), an archive built without -ffunction-sections."""
    if name.endswith(".cold"):
        section = ".text.unlikely." + name[: -len(".cold")]
        return section if section in sections else None
    for section in (".text." + name, ".text.unlikely." + name):
        if section in sections:
            return section
    return None


def executed_addresses(cmd, tmp):
    """The instruction addresses one run executes: lackey logs "I  addr,size" per instruction, here
    into a FIFO (a trace is gigabytes), apart from the program's own output."""
    fifo = os.path.join(tmp, "lackey.fifo")
    os.mkfifo(fifo)
    proc = subprocess.Popen(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={fifo}", *cmd],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    addresses = set()
    try:
        with open(fifo, "rb") as f:
            for line in f:
                if line.startswith(b"I "):
                    addresses.add(int(line[2:].split(b",")[0], 16))
    finally:
        rc = proc.wait()
        os.unlink(fifo)
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {rc} under valgrind")
    return addresses


def main():
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is needed: apt-get install valgrind")
    syms = function_symbols(SETUP)
    starts = [s[0] for s in syms]
    tmp = tempfile.mkdtemp(prefix="unbounded-hot-text-", dir=scratch_base())
    try:
        m = MachineRoot(tmp=os.path.join(tmp, "machine"))
        m.standard(V1, gpus=8, extra_unrelated=3000)
        for g in range(8):
            m.add_mig(g, {gi: [0] for gi in range(7, 14)})
        m.add_imex_channels(range(4))
        root = ["--root", m.path]
        addresses = set()
        for cmd in ([SETUP, *root, "--json", "setup"], [SETUP, *root, "--json", "setup"], [SETUP, *root, "setup"]):
            addresses |= executed_addresses(cmd, tmp)
        # A refresh finds nothing changed only once staging is older than the settle time (10 s).
        time.sleep(max(0.0, 10.5 - (time.time() - os.stat(m.p("/run/host-nvidia/0")).st_ctime)))
        for cmd in ([SETUP, *root, "--json", "refresh"], [SETUP, *root, "refresh"],
                    [SETUP, *root, "--json", "verify"], [SETUP, *root, "verify"]):
            addresses |= executed_addresses(cmd, tmp)
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
    sections = text_sections(link_inputs())
    listed = {name: section_of(name, sections) for name in hot}
    body = sorted({s for s in listed.values() if s})
    with open(SCRIPT, "w") as f:
        f.write("/* Written by bench/hot_text.py (run it again after changing the boot path's functions): the\n"
                "   input sections of the functions that setup, its unchanged re-run, a no-change refresh and\n"
                "   verify execute, in an output section of their own ahead of .text, so that the kernel's\n"
                "   fault-around maps them and not the cold code between them (bench/README.md). */\n"
                "SECTIONS\n{\n  .text.boot :\n  {\n"
                f"    {STARTUP}\n" + "".join(f"    *({s})\n" for s in body) +
                "  }\n}\nINSERT BEFORE .text;\n")
    total = sum(size for _, size, name in syms if name in hot)
    print(f"{len(hot)} functions ran, {total / 1024:.0f} KiB of {sum(s[1] for s in syms) / 1024:.0f} KiB of text; "
          f"{len(body)} input sections in {os.path.relpath(SCRIPT)}; "
          f"{sum(1 for s in listed.values() if not s)} without a section of their own")


if __name__ == "__main__":
    main()
