#!/usr/bin/env python3
"""make gpu-check: the real thing, on a machine with an NVIDIA GPU and driver (never in CI).

Lays out a machine root whose staging mounts are this host's own driver directories and whose nodes
are this host's, both as `unbounded-nvidia-host binds --print` chooses them (the host's half, held here
to the real thing), bound in a private mount namespace with /proc/driver/nvidia; runs `unbounded-nvidia-host
check`, setup and `verify --json` on it; then proves the
copied root works: the probe (cuda-probe, built in the build directory) loads libcuda.so.1 from the root
by absolute path with only the root's lib dir on LD_LIBRARY_PATH and calls cuInit, cuDriverGetVersion,
cuDeviceGetCount and cuDeviceGetUuid, and no NVIDIA library it mapped may come from elsewhere; the root's
bin/nvidia-smi -L runs with the root's libraries (LD_DEBUG shows which libnvidia-ml it loaded). The GPUs,
UUIDs and driver version must agree with the spec's devices and /proc/driver/nvidia/version.

Prints one verdict line: "gpu-check: PASS: ..." (exit 0), "gpu-check: FAIL: ..." (exit 1), or, on a
machine without an NVIDIA GPU and driver, "gpu-check: no GPU: ..." (exit 2: not a pass).
Needs root, python3, util-linux (unshare, mount) and the build directory (BUILD, default build) of a
glibc no newer than the machine's; nothing is installed and nothing on the machine is changed.
GPU_CHECK_HOST_ROOT=DIR looks for the driver under DIR instead of / (the no-GPU path's test).

Usage: tests/gpu/gpu_check.py [BUILD_DIR]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HOST = os.environ.get("GPU_CHECK_HOST_ROOT", "/")
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
SETUP = os.path.join(BUILD, "setup", "unbounded-nvidia-setup")
PROBE = os.path.join(BUILD, "tests", "gpu", "cuda-probe")
HOST_TOOL = os.path.join(BUILD, "host", "unbounded-nvidia-host")


def host(path):
    return os.path.join(HOST, path.lstrip("/"))


def verdict(kind, text, code):
    print(f"gpu-check: {kind}: {text}")
    sys.exit(code)


def no_gpu_reason():
    if not os.path.isfile(host("/proc/driver/nvidia/version")):
        return "/proc/driver/nvidia/version is missing: no NVIDIA kernel module is loaded"
    if not os.path.exists(host("/dev/nvidiactl")):
        return "/dev/nvidiactl is missing"
    if not os.path.isdir(host("/proc/driver/nvidia/gpus")) or not os.listdir(host("/proc/driver/nvidia/gpus")):
        return "/proc/driver/nvidia/gpus lists no GPU"
    return None


def host_binds():
    """The host directories and nodes `unbounded-nvidia-host binds` gives a machine of this host: (staging
    directories in order, device paths), or a failure verdict with its message."""
    r = subprocess.run([HOST_TOOL, "--root", HOST, "--json", "binds", "gpu-check", "--print"], capture_output=True, text=True)
    if r.returncode != 0:
        verdict("FAIL", f"unbounded-nvidia-host binds: {r.stderr.strip()[-300:]}", 1)
    out = json.loads(r.stdout)
    nodes = [line.split("=", 1)[1] for line in out["nspawn"] if line.startswith("[Files] Bind=/dev/")]
    return out["staging"], nodes


def namespace_script(root, dirs, nodes):
    """Shell commands for the private mount namespace: the binds, then setup, verify and the probes."""
    arch = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(os.uname().machine, "")
    lines = ["set -e"]
    for n, d in enumerate(dirs):
        lines += [f"mkdir -p {root}/run/host-nvidia/{n}", f"mount --bind -o ro {d} {root}/run/host-nvidia/{n}",
                  f"mount -o remount,bind,ro {root}/run/host-nvidia/{n}"]
    lines += [f"mkdir -p {root}/dev {root}/proc/driver/nvidia",
              f"mount --bind /proc/driver/nvidia {root}/proc/driver/nvidia"]
    for path in nodes:
        if os.path.isdir(path):
            lines += [f"mkdir -p {root}{path}", f"mount --rbind {path} {root}{path}"]
        else:
            lines += [f"mkdir -p {root}{os.path.dirname(path)}", f"touch {root}{path}", f"mount --bind {path} {root}{path}"]
    lines += [f"{SETUP} --root {root} --json setup > {root}/setup.json || true",
              f"{SETUP} --root {root} --json verify > {root}/verify.json || true"]
    lib = f"{root}/run/nvidia/driver/lib/{arch}"
    lines += [f"LD_LIBRARY_PATH={lib} {PROBE} {lib}/libcuda.so.1 > {root}/probe.json || true",
              f"LD_DEBUG=libs LD_DEBUG_OUTPUT={root}/smi-ld LD_LIBRARY_PATH={lib} {root}/run/nvidia/driver/bin/nvidia-smi -L "
              f"> {root}/smi.txt 2>&1 || true",
              f"LD_LIBRARY_PATH={lib} {root}/run/nvidia/driver/bin/nvidia-smi --query-gpu=driver_version,uuid "
              f"--format=csv,noheader > {root}/smi-query.txt 2>&1 || true"]
    return "\n".join(lines) + "\n"


def read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        verdict("FAIL", f"{what} gave no JSON ({e})", 1)


def main():
    reason = no_gpu_reason()
    if reason:
        verdict("no GPU", f"{reason} (under {HOST}); this check needs a machine with an NVIDIA GPU and driver", 2)
    for path in (SETUP, PROBE, HOST_TOOL):
        if not os.access(path, os.X_OK):
            verdict("FAIL", f"{path} is missing: run make build first", 1)
    if os.geteuid() != 0:
        verdict("FAIL", "needs root (bind mounts in a private mount namespace)", 1)
    check = subprocess.run([HOST_TOOL, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        verdict("FAIL", f"unbounded-nvidia-host check: {check.stdout.strip()[-400:]}", 1)
    dirs, nodes = host_binds()
    root = tempfile.mkdtemp(prefix="unbounded-gpu-check-")
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", namespace_script(root, dirs, nodes)],
                           capture_output=True, text=True, timeout=110)
        if r.returncode != 0:
            verdict("FAIL", f"the machine root could not be laid out: {r.stderr.strip()[-300:]}", 1)
        setup = read_json(f"{root}/setup.json", "setup")
        if not setup.get("ready"):
            verdict("FAIL", f"setup: {setup.get('outcome')}: {setup.get('error') or setup.get('problems')}", 1)
        verify = read_json(f"{root}/verify.json", "verify")
        if not verify.get("ready"):
            verdict("FAIL", f"verify: {verify.get('outcome')}: {verify.get('problems')}", 1)
        version = setup["driver_version"]
        with open("/proc/driver/nvidia/version") as f:
            if version not in f.read():
                verdict("FAIL", f"the root holds {version}, /proc/driver/nvidia/version another", 1)
        with open(f"{root}/etc/cdi/nvidia.yaml") as f:
            spec = f.read()
        spec_uuids = sorted(set(re.findall(r"name: (GPU-[0-9a-f-]{36})", spec)))
        probe = read_json(f"{root}/probe.json", "the CUDA probe")
        if not probe.get("ok"):
            verdict("FAIL", f"CUDA from the driver root: {probe.get('error')}", 1)
        foreign = [p for p in probe["mapped"] if not p.startswith(f"{root}/run/nvidia/driver/")]
        if foreign:
            verdict("FAIL", f"the probe mapped NVIDIA libraries from outside the driver root: {foreign}", 1)
        if sorted(probe["uuids"]) != spec_uuids or probe["count"] != setup.get("gpus"):
            verdict("FAIL", f"CUDA sees {probe['count']} GPU(s) {probe['uuids']}, the spec offers {setup.get('gpus')} {spec_uuids}", 1)
        with open(f"{root}/smi.txt") as f:
            smi = f.read()
        smi_uuids = sorted(re.findall(r"UUID: (GPU-[0-9a-f-]{36})", smi))
        if smi_uuids != spec_uuids:
            verdict("FAIL", f"nvidia-smi -L from the root: {smi.strip()[:300]}", 1)
        loaded = ""
        for name in os.listdir(root):
            if name.startswith("smi-ld"):
                with open(os.path.join(root, name)) as f:
                    loaded += f.read()
        nvml = re.findall(r"calling init: (\S*libnvidia-ml\.so\S*)", loaded)
        if not nvml or any(not p.startswith(f"{root}/run/nvidia/driver/") for p in nvml):
            verdict("FAIL", f"nvidia-smi did not load libnvidia-ml from the driver root: {nvml}", 1)
        with open(f"{root}/smi-query.txt") as f:
            query = f.read()
        if version not in query:
            verdict("FAIL", f"nvidia-smi reports {query.strip()[:200]}, the root holds {version}", 1)
        verdict("PASS", f"driver {version} (CUDA {probe['cuda_driver_version']}), {probe['count']} GPU(s) {', '.join(spec_uuids)}: "
                f"libcuda, libnvidia-ml and nvidia-smi from the driver root, spec and verify agree", 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
