#!/usr/bin/python3
"""Benchmark of `unbounded-nvidia-setup generate-cdi` for a machine with 8 GPUs, and for one whose 8 GPUs
have 7 MIG instances each and 4 IMEX channels.

Prints the in-process generation time (the command's own timings_ms.total: device enumeration,
spec generation and the atomic write) and the wall time per process, medians of 50 runs, with the
spec's device, device node and mount counts.

A third machine has everything the graphics and IPC support added to the spec: DRM nodes and the by-path hook, the IPC
sockets and MPS directory, the graphics configuration files, libnvidia-api and the DLSS DLLs, OptiX's
data, NVSwitch, GDRCopy and GDS nodes. For it the unchanged `setup` re-run is measured too, and with
BASELINE_SETUP_BIN=<an older unbounded-nvidia-setup> both are measured for that binary on the same
machine, interleaved run by run (it leaves out what it does not know, which is the comparison).

Usage: bench/cdi_bench.py [BUILD_DIR]   (run `make build` first)
"""

import json
import os
import shutil
import statistics
import tempfile

from benchlib import scratch_base, timed
from unbounded_tests.cdi_case import fake_hook
from unbounded_tests.harness import SETUP, V1, MachineRoot, fixture, make_chardev, pe_image, write

BASELINE = os.environ.get("BASELINE_SETUP_BIN")

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


def everything(m):
    """8 GPUs with their DRM nodes and the by-path hook, and every file and node of the graphics and IPC support."""
    m.standard(V1, gpus=8)
    for i in range(8):
        bus = f"0000:{0x18 + i:02x}:00.0"
        for node, minor in ((f"card{i + 1}", i + 1), (f"renderD{128 + i}", 128 + i)):
            os.makedirs(m.p(f"/sys/bus/pci/devices/{bus}/drm/{node}"))
            make_chardev(m.p(f"/dev/dri/{node}"), 226, minor)
    write(m.p("/usr/bin/nvidia-cdi-hook"), fake_hook(["create-symlinks", "update-ldcache", "enable-cuda-compat",
                                                      "disable-device-node-modification"]), 0o755)
    socks = m.add_ipc()
    lib = m.p("/run/host-nvidia/0")
    for name in ("libnvidia-api.so.1", f"libnvoptix.so.{V1}"):
        shutil.copy(fixture(name), lib)
    write(os.path.join(lib, "nvoptix.bin"), "optix data\n" * 1000)
    os.makedirs(os.path.join(lib, "nvidia/wine"))
    for dll in ("nvngx.dll", "_nvngx.dll"):
        write(os.path.join(lib, "nvidia/wine", dll), pe_image(b" a PE file"))
    share = m.p("/run/host-nvidia/3")
    for rel, text in (("glvnd/egl_vendor.d/10_nvidia.json", '{"ICD": {"library_path": "libEGL_nvidia.so.0"}}'),
                      ("vulkan/icd.d/nvidia_icd.json", '{"ICD": {"library_path": "libGLX_nvidia.so.0"}}'),
                      ("vulkan/implicit_layer.d/nvidia_layers.json", '{"layer": {"library_path": "libGLX_nvidia.so.0"}}')):
        write(os.path.join(share, rel), text + "\n")
    m.add_fabric(nvswitches=range(4), gdrcopy=True, gds=range(2))
    write(m.p("/etc/cufile.json"), "{}\n")
    os.makedirs(m.p("/run/udev/data"))
    return socks


def bench_everything():
    label = "8 GPUs with every graphics and IPC entry"
    tmp = tempfile.mkdtemp(prefix="unbounded-cdi-bench-", dir=scratch_base())
    try:
        binaries = [("ours", SETUP)] + ([("baseline", BASELINE)] if BASELINE else [])
        # One machine per binary, built alike: their memos (discovery, hook) are of different formats
        # and must not make each other's runs cold.
        machines, socks = {}, []
        for name, binary in binaries:
            m = MachineRoot(tmp=os.path.join(tmp, f"machine-{name}"))
            socks += everything(m)
            os.makedirs(m.p("/tmp"), exist_ok=True)
            timed([binary, "--root", m.path, "setup"])  # its own root, spec and memos in place
            machines[name] = m
        gen = {n: [] for n, _ in binaries}
        rerun = {n: [] for n, _ in binaries}
        results = {}
        for _ in range(RUNS):
            for name, binary in binaries:  # interleaved: both see the same noise
                m = machines[name]
                t, stdout = timed([binary, "--root", m.path, "--json", "setup"])
                rerun[name].append(json.loads(stdout)["timings_ms"]["total"])
                t, stdout = timed([binary, "--root", m.path, "--json", "generate-cdi", "--output", m.p("/tmp/spec.yaml")])
                results[name] = json.loads(stdout)
                gen[name].append(results[name]["timings_ms"]["total"])
        print(f"{label}; medians of {RUNS} runs, in-process")
        for name, _ in binaries:
            res = results[name]
            print(f"  {name:8}: generate-cdi {statistics.median(gen[name]):6.2f} ms ({res['cdi_devices']} devices, "
                  f"{res['cdi_device_nodes']} device nodes, {res['cdi_mounts']} mounts), "
                  f"unchanged setup re-run {statistics.median(rerun[name]):6.2f} ms")
        if BASELINE:
            g = statistics.median(gen["ours"]) / statistics.median(gen["baseline"])
            r = statistics.median(rerun["ours"]) / statistics.median(rerun["baseline"])
            print(f"  ours vs baseline: generate-cdi {g:.2f}x (target <= 1.2x), re-run {r:.2f}x (target <= 1.1x)")
        for s in socks:
            s.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    bench("8 GPUs", eight_gpus)
    bench("8 GPUs x 7 MIG + 4 IMEX channels", eight_gpus_mig_imex)
    bench_everything()


if __name__ == "__main__":
    main()
