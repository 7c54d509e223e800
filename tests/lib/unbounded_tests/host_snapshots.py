"""The real hosts as snapshots for the planner's unit tests.

Each host is one of test_real_hosts.py's: Debian's real NVIDIA packages installed into a host tree
(debian_hosts.py) and bound into a machine as the README's recipe says. A recording runs the real
setup on it and keeps what the planner decides from: the driver root's manifest (with the two fields
that only name this one copy, the sources' mtimes and inode identities, blanked) and the spec setup
wrote beside it (our version in its first line as @VERSION@). tests/unit/test_plan_real_hosts.cpp plans each spec from its manifest alone and
compares the bytes; test_real_hosts.py records afresh and holds the checked-in snapshots to it.

    SETUP_BIN=build/setup/unbounded-nvidia-setup DEBIAN_NVIDIA_DEBS=build/nvidia-debs \
        PYTHONPATH=tests/lib python3 -m unbounded_tests.host_snapshots   # re-record tests/unit/host-snapshots/
"""

import json
import os
import re
import shutil
import sys
import tempfile

from unbounded_tests import debian_hosts as dh
from unbounded_tests.harness import MachineRoot

LIB = "/usr/lib/x86_64-linux-gnu"
GPUS = 2  # the devices the unit test makes in memory: tests/unit/test_plan_real_hosts.cpp
UUIDS = [f"GPU-{i:08x}-8e4b-4d0e-9c1a-2b7e6d5f4a10" for i in range(8)]
SNAPSHOTS = os.path.join(os.path.dirname(__file__), "..", "..", "unit", "host-snapshots")

# name: (the package sets of its host tree, the host paths bound as /run/host-nvidia/N, its flavour)
HOSTS = {
    "bookworm-535-readme-binds": (("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware"),
                                  (LIB, "/usr/bin", "/lib/firmware/nvidia"), "current"),
    "bookworm-535-nvidia-current": (("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware"),
                                    (LIB, "/usr/lib/nvidia/current", "/lib/firmware/nvidia"), "current"),
    "bookworm-tesla-535": (("bookworm-tesla-535",), (LIB, "/usr/lib/nvidia/tesla-535"), "tesla-535"),
    "trixie-550-readme-binds": (("trixie-550",), (LIB, "/usr/bin"), "current"),
}


def version_in(host, flavour="current"):
    """The driver version a host tree holds in <multiarch>/nvidia/<flavour>/ (libcuda.so.<version>)."""
    names = os.listdir(host.p(f"{LIB}/nvidia/{flavour}"))
    return [n for n in names if n.startswith("libcuda.so.") and n.count(".") == 4][0][len("libcuda.so."):]


def machine(owner, host, binds, version, gpus=1):
    """A machine of `gpus` GPUs with `binds` of `host` as its staging mounts and `version`'s module."""
    m = MachineRoot(owner)
    for n, path in enumerate(binds):
        dh.bind(m, host, path, n)
    m.set_proc_version(version)
    m.add_control_nodes()
    for i in range(gpus):
        m.add_gpu(i, f"0000:{0x18 + i:02x}:00.0", UUIDS[i])
    return m


def normalized_manifest(text):
    """The manifest without what names only this copy of the sources (their mtimes and identities)."""
    doc = json.loads(text)
    for e in doc["entries"]:
        if e["type"] == "file":
            e["mtime_ns"] = 0
            e["source_id"] = "recorded"
    return json.dumps(doc, indent=1) + "\n"


def without_version(spec):
    """The spec with our version in its first line as @VERSION@: a release does not make the snapshots stale."""
    return re.sub(r"^(# Written by unbounded-nvidia-setup )[^;\n]*;", r"\1@VERSION@;", spec, count=1)


def record(name, host, owner=None):
    """{file name: text} of one host's snapshot, from a real setup on it."""
    _, binds, flavour = HOSTS[name]
    version = version_in(host, flavour)
    m = machine(owner, host, binds, version, gpus=GPUS)
    try:
        r = m.setup()
        if r.returncode != 0:
            raise RuntimeError(f"setup failed on {name}: {r.stderr}")
        with open(os.path.join(m.driver_root(), ".unbounded-manifest.json")) as f:
            manifest = normalized_manifest(f.read())
        with open(m.p("/etc/cdi/nvidia.yaml")) as f:
            spec = without_version(f.read())
    finally:
        if owner is None:
            shutil.rmtree(m.path, ignore_errors=True)
    return {"manifest.json": manifest, "nvidia.yaml": spec}


def install_hosts(tmp):
    """{package sets: host tree} for every host of HOSTS."""
    trees = {}
    for sets, _, _ in HOSTS.values():
        if sets not in trees:
            trees[sets] = dh.HostTree(os.path.join(tmp, sets[0]))
            for s in sets:
                dh.install_debian(trees[sets], s)
    return trees


def main():
    tmp = tempfile.mkdtemp(prefix="unbounded-host-snapshots-")
    try:
        trees = install_hosts(tmp)
        for name, (sets, _, _) in HOSTS.items():
            out = os.path.join(SNAPSHOTS, name)
            os.makedirs(out, exist_ok=True)
            for file, text in record(name, trees[sets]).items():
                with open(os.path.join(out, file), "w") as f:
                    f.write(text)
            print(f"recorded {name}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
