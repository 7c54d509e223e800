#!/usr/bin/python3
"""Benchmark of `unbounded-nvidia-setup setup` on driver trees of 155 MiB and 1 GiB, on a machine of
8 GPUs with 7 MIG instances each and 4 IMEX channels.

For each tree, side by side in one run: a full setup against `cp -L` of the same files and against a
parallel copy of them (`xargs -P<cpus> cp -L`), an unchanged re-run against the full setup, and (155 MiB)
a refresh that finds nothing changed against the unchanged re-run, with the default configuration
(the bench first lets staging age past the default settle time, as it has on a running machine),
also as the median ratio of alternating pairs; and
the setup process's peak RSS (VmHWM, as setup reports it in its --json result). Figures are medians
on tmpfs (the driver root's file system in production), with the staging files already in the page
cache, as they are on a host.

Memory, on these two machines, on one of 8 GPUs without MIG, and on a larger one that tests the bound's
slopes: the peak RSS (VmHWM: the binary's text and the libraries' pages, file-backed and shared,
included) and the peak private memory of a full setup, an unchanged re-run and a no-change refresh:
the anonymous RSS at its peak (bench/privmem.py: sampled, under ptrace, at every system call that
can release anonymous memory) and the heap's peak (valgrind massif, when valgrind is installed). The
private peak must stay within PRIVATE_BOUND, which grows with the driver files in the root and the
devices offered; a run over it is named and the bench exits 1.

Usage: bench/setup_bench.py [BUILD_DIR]   (run `make build` first)
With BENCH_MEMORY_ONLY=1, only the memory figures and the bound (about 2 minutes).
With BASELINE_SETUP_BIN=<an older unbounded-nvidia-setup>, its unchanged re-run, its no-change refresh
and its peak RSS on the 155 MiB tree are measured too, interleaved with ours on the same machine root,
so a change can be compared with the binary before it in one session.
"""

import json
import os
import shutil
import statistics
import tempfile
import time

from benchlib import BUILD, ENV, scratch_base, timed
from privmem import peak_anon_kib, peak_heap_bytes
from unbounded_tests.harness import SETUP, V1, MachineRoot, fixture

# Real drivers: a few libraries of hundreds of MB (libcuda, the GL core, the PTX JIT) and many small ones.
TREES = {
    "155 MiB": ({"libcuda": 70, "libnvidia-glcore": 40, "libnvidia-eglcore": 20, "libnvidia-ptxjitcompiler": 25}, 21),
    "1 GiB": ({"libcuda": 400, "libnvidia-glcore": 220, "libnvidia-ptxjitcompiler": 180, "libnvidia-eglcore": 120,
               "libnvcuvid": 40, "libnvidia-opticalflow": 30, "libnvidia-encode": 20}, 7),
}
CPUS = len(os.sched_getaffinity(0))
# Alternating pairs of an unchanged re-run and a no-change refresh: the two differ by a few tenths of a
# per cent, under this VM's drift between the medians of separate lists, so the ratio is taken per pair.
PAIRS = 501

# The bound on the private (anonymous) peak of a setup, re-run or refresh, in KiB: a base, and so much per
# driver file in the root, per device offered (GPU, MIG instance, IMEX channel) and per copy thread (its
# stack and malloc arena; a full setup runs up to 8). Measured on the default build (bench/README.md,
# "Memory"): about 350 KiB of base, 4.2 KiB per file, 4.2-4.7 KiB per device, 20 KiB per thread.
PRIVATE_BOUND = {"base": 400, "per_file": 5, "per_device": 6, "per_copy_thread": 24}
MEMORY_RUNS = 5
MEMORY_ONLY = os.environ.get("BENCH_MEMORY_ONLY") == "1"
BASELINE = os.environ.get("BASELINE_SETUP_BIN")
failures = []


def private_bound(res):
    """(files, devices, copy threads, the bound in KiB) of a run's --json result."""
    b = PRIVATE_BOUND
    files, threads = res["files"], res["copy_threads"]
    devices = res["gpus"] + res.get("mig_devices", 0) + res.get("imex_channels", 0)
    return files, devices, threads, (b["base"] + b["per_file"] * files + b["per_device"] * devices
                                     + b["per_copy_thread"] * threads)


def paired_ratios(rerun, refresh):
    """Sorted refresh/re-run time ratios (or any two commands') of PAIRS pairs run back to back, which
    of the two goes first alternating: the medians of separate runs move with the machine's load."""
    ratios = []
    for i in range(PAIRS):
        if i % 2:
            a, _ = timed(rerun)
            b, _ = timed(refresh)
        else:
            b, _ = timed(refresh)
            a, _ = timed(rerun)
        ratios.append(b / a)
    return sorted(ratios)


def bench_tree(tmp, label, padding, runs, with_refresh):
    m = MachineRoot(tmp=os.path.join(tmp, "machine"))
    # A datacenter node: 8 GPUs with 7 MIG instances each and 4 IMEX channels.
    m.standard(V1, gpus=8, extra_unrelated=3000)
    for g in range(8):
        m.add_mig(g, {gi: [0] for gi in range(7, 14)})
    m.add_imex_channels(range(4))
    for lib, mb in padding.items():
        with open(m.p(f"/run/host-nvidia/0/{lib}.so.{V1}"), "ab") as f:
            f.write(os.urandom(mb << 20))
    cmd = [SETUP, "--root", m.path, "--json", "setup"]
    refresh = [SETUP, "--root", m.path, "--json", "refresh"]
    baseline_bin = os.environ.get("BASELINE_SETUP_BIN") if with_refresh else None
    baseline = [baseline_bin, "--root", m.path, "--json", "setup"] if baseline_bin else None
    baseline_refresh = [baseline_bin, "--root", m.path, "--json", "refresh"] if baseline_bin else None

    # One warm-up run, then the list of files it copied (the manifest's sources) for cp -L.
    timed(cmd)
    manifest = json.load(open(os.path.join(m.driver_root(), ".unbounded-manifest.json")))
    sources = [m.p(e["source"]) for e in manifest["entries"] if e["type"] == "file"]
    total_bytes = sum(e["size"] for e in manifest["entries"] if e["type"] == "file")
    listing = os.path.join(tmp, "sources")
    with open(listing, "wb") as f:
        f.write(b"\0".join(s.encode() for s in sources))
    if MEMORY_ONLY:
        memory(m, f"8 GPUs x 7 MIG + 4 IMEX, {label} tree")
        return
    if with_refresh:
        # Staging as on a running machine: quiet for longer than the default settle time (10 s).
        time.sleep(max(0.0, 10.5 - (time.time() - os.stat(m.p("/run/host-nvidia/0")).st_ctime)))

    full, rerun, noop, base_rerun, base_noop, cp, pcp, rss, base_rss, same_rss, threads = [], [], [], [], [], [], [], [], [], [], set()
    dest = os.path.join(tmp, "cp")
    for _ in range(runs):
        shutil.rmtree(m.driver_root())
        t, out = timed(cmd)
        res = json.loads(out)
        assert res["bytes_copied"] == total_bytes, res
        full.append(t)
        rss.append(res["peak_rss_kib"])
        threads.add(res["copy_threads"])
        t, out = timed(cmd)
        res = json.loads(out)
        assert res["bytes_copied"] == 0, res
        rerun.append(t)
        rss.append(res["peak_rss_kib"])
        same_rss.append(res["peak_rss_kib"])
        if with_refresh:
            t, out = timed(refresh)
            res = json.loads(out)
            assert res["outcome"] == "ready" and res["bytes_copied"] == 0 and res["settle_waited_ms"] == 0, res
            noop.append(t)
            same_rss.append(res["peak_rss_kib"])
        if baseline:
            t, out = timed(baseline)
            res = json.loads(out)
            assert res["bytes_copied"] == 0, res
            base_rerun.append(t)
            base_rss.append(res["peak_rss_kib"])
            t, out = timed(baseline_refresh)
            res = json.loads(out)
            assert res["outcome"] == "ready" and res["bytes_copied"] == 0 and res["settle_waited_ms"] == 0, res
            base_noop.append(t)
            base_rss.append(res["peak_rss_kib"])
        for samples, copy in ((cp, ["cp", "-L", *sources, dest]),
                              (pcp, ["sh", "-c", f"xargs -0 -P{CPUS} -n1 cp -L -t '{dest}' < '{listing}'"])):
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            t, _ = timed(copy)
            samples.append(t)
        shutil.rmtree(dest, ignore_errors=True)

    f, r, c, p = (statistics.median(x) for x in (full, rerun, cp, pcp))
    print(f"{label} tree: {len(sources)} driver files, {total_bytes / 2**20:.1f} MiB, among "
          f"{len(os.listdir(m.p('/run/host-nvidia/0')))} entries of a host lib dir; 8 GPUs x 7 MIG, 4 IMEX channels; "
          f"medians of {runs} runs")
    print(f"  full setup ({'/'.join(map(str, sorted(threads)))} copy threads): {f * 1000:8.1f} ms")
    print(f"  cp -L of same files:          {c * 1000:8.1f} ms   full/cp = {f / c:.2f}")
    print(f"  xargs -P{CPUS} cp -L:              {p * 1000:8.1f} ms   full/parallel cp = {f / p:.2f}")
    print(f"  unchanged re-run:             {r * 1000:8.1f} ms   re-run/full = {100 * r / f:.1f} %  (target <= 5 %)")
    if noop:
        n = statistics.median(noop)
        print(f"  refresh, no change:           {n * 1000:8.1f} ms   refresh/re-run = {n / r:.2f}")
        ratios = paired_ratios(cmd, refresh)
        print(f"  refresh/re-run in {PAIRS} alternating pairs: median {statistics.median(ratios):.3f}, "
              f"quartiles {ratios[PAIRS // 4]:.3f}-{ratios[3 * PAIRS // 4]:.3f}")
    if base_rerun:
        b = statistics.median(base_rerun)
        bn = statistics.median(base_noop)
        print(f"  baseline re-run:              {b * 1000:8.1f} ms   re-run/baseline = {r / b:.2f}  ({baseline_bin})")
        print(f"  baseline refresh, no change:  {bn * 1000:8.1f} ms   refresh/baseline = {statistics.median(noop) / bn:.2f}"
              f"  (baseline refresh/re-run = {bn / b:.2f})")
        print(f"  peak RSS of re-run and refresh: {max(same_rss) / 1024:.1f} MiB, baseline's {max(base_rss) / 1024:.1f} MiB")
        ratios = paired_ratios(baseline, cmd)
        print(f"  re-run/baseline re-run in {PAIRS} alternating pairs: median {statistics.median(ratios):.3f}, "
              f"quartiles {ratios[PAIRS // 4]:.3f}-{ratios[3 * PAIRS // 4]:.3f}")
    print(f"  peak RSS of setup:            {max(rss) / 1024:8.1f} MiB   (target <= 16 MiB)")
    memory(m, f"8 GPUs x 7 MIG + 4 IMEX, {label} tree")
    shutil.rmtree(m.path, ignore_errors=True)


def memory(m, label):
    """The peak RSS and the private peaks of a full setup, an unchanged re-run and a no-change refresh
    on machine m (staging older than the settle time), each the highest of MEMORY_RUNS runs, checked
    against PRIVATE_BOUND; with BASELINE_SETUP_BIN, that binary's interleaved run by run."""
    binaries = [("ours", SETUP)] + ([("baseline", BASELINE)] if BASELINE else [])
    time.sleep(max(0.0, 10.5 - (time.time() - os.stat(m.p("/run/host-nvidia/0")).st_ctime)))
    print(f"  memory ({label}; the highest of {MEMORY_RUNS} runs):")
    for name in ("full setup", "unchanged re-run", "refresh, no change"):
        verb = "refresh" if name.startswith("refresh") else "setup"
        anon, rss, results = {b: [] for b, _ in binaries}, {b: [] for b, _ in binaries}, {}
        for _ in range(MEMORY_RUNS):
            for b, binary in binaries:
                if name == "full setup":
                    shutil.rmtree(m.driver_root())
                kib, out = peak_anon_kib([binary, "--root", m.path, "--json", verb], ENV)
                res = json.loads(out)
                assert res["ready"] and (res["bytes_copied"] == 0) == (name != "full setup"), res
                anon[b].append(kib)
                rss[b].append(res["peak_rss_kib"])
                results[b] = res
        for b, binary in binaries:
            if name == "full setup":
                shutil.rmtree(m.driver_root())
            heap = peak_heap_bytes([binary, "--root", m.path, "--json", verb], ENV)
            figures = (f"peak RSS {max(rss[b]) / 1024:4.1f} MiB; private: anonymous {max(anon[b]):5d} KiB"
                       f"{'' if heap is None else f', heap {heap / 1024:5.0f} KiB'}")
            if b == "baseline":
                print(f"    {'  baseline:':20} {figures}")
                continue
            files, devices, threads, bound = private_bound(results["ours"])
            verdict = "within" if max(anon[b]) <= bound else "OVER"
            print(f"    {name + ':':20} {figures}; bound {bound} KiB ({files} files, {devices} devices, "
                  f"{threads} copy threads): {verdict}")
            if max(anon[b]) > bound:
                failures.append(f"{label}, {name}: private peak {max(anon[b])} KiB over its bound of {bound} KiB")


def bench_memory(tmp, label, gpus, mig_gpus=0, extra_files=0, padding=None):
    """memory() on a machine of its own: gpus GPUs, the first mig_gpus of them with 7 MIG instances
    and then 4 IMEX channels, extra_files more driver libraries, the driver padded as in TREES."""
    m = MachineRoot(tmp=os.path.join(tmp, "machine"))
    m.standard(V1, gpus=gpus, extra_unrelated=3000)
    for g in range(mig_gpus):
        m.add_mig(g, {gi: [0] for gi in range(7, 14)})
    if mig_gpus:
        m.add_imex_channels(range(4))
    lib = m.p("/run/host-nvidia/0")
    for i in range(extra_files):
        shutil.copy(fixture(f"libnvidia-ml.so.{V1}"), os.path.join(lib, f"libnvidia-extra{i}.so.{V1}"))
    for name, mb in (padding or {}).items():
        with open(os.path.join(lib, f"{name}.so.{V1}"), "ab") as f:
            f.write(os.urandom(mb << 20))
    timed([SETUP, "--root", m.path, "setup"])
    memory(m, label)
    shutil.rmtree(m.path, ignore_errors=True)


def bench_memory_debian(tmp, label):
    """memory() on Debian's real 535 files (test_real_hosts.py's bookworm host, bound as the README's
    Debian recipe says), 8 GPUs, when the packages are there (make check fetches them into
    BUILD_DIR/nvidia-debs; DEBIAN_NVIDIA_DEBS names another place)."""
    from unbounded_tests import debian_hosts as dh, host_snapshots as hs
    sets, binds, flavour = hs.HOSTS["bookworm-535-nvidia-current"]
    host = dh.HostTree(os.path.join(tmp, "host"))
    for s in sets:
        dh.install_debian(host, s)
    m = MachineRoot(tmp=os.path.join(tmp, "machine"))
    for n, path in enumerate(binds):
        dh.bind(m, host, path, n)
    m.set_proc_version(hs.version_in(host, flavour))
    m.add_control_nodes()
    for i in range(8):
        m.add_gpu(i, f"0000:{0x18 + i:02x}:00.0", hs.UUIDS[i])
    timed([SETUP, "--root", m.path, "setup"])
    memory(m, label)
    shutil.rmtree(m.path, ignore_errors=True)


def main():
    base = scratch_base()
    print(f"{CPUS} CPUs; {'tmpfs (/dev/shm)' if base else 'the default temp dir'}")
    for label, (padding, runs) in TREES.items():
        tmp = tempfile.mkdtemp(prefix="unbounded-bench-", dir=base)
        try:
            bench_tree(tmp, label, padding, runs, with_refresh=label == "155 MiB")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for label, kw in (("8 GPUs, 155 MiB tree", {"gpus": 8, "padding": TREES["155 MiB"][0]}),
                      ("32 GPUs (8 x 7 MIG + 4 IMEX), 222 driver files", {"gpus": 32, "mig_gpus": 8, "extra_files": 200})):
        tmp = tempfile.mkdtemp(prefix="unbounded-bench-", dir=base)
        try:
            bench_memory(tmp, label, **kw)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    debs = os.environ.setdefault("DEBIAN_NVIDIA_DEBS", os.path.join(BUILD, "nvidia-debs"))
    if os.path.exists(os.path.join(debs, ".complete")):
        tmp = tempfile.mkdtemp(prefix="unbounded-bench-", dir=base)
        try:
            bench_memory_debian(tmp, "Debian's real 535 files (bookworm, nvidia/current bound), 8 GPUs")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"(no Debian packages in {debs}: make check fetches them; the real files' figures left out)")
    if failures:
        raise SystemExit("private memory over its bound (PRIVATE_BOUND, bench/README.md):\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
