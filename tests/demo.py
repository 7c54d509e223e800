#!/usr/bin/python3
"""The demo: a machine root whose staging looks like a Debian host (nvidia/current with absolute
symlinks among thousands of unrelated libraries), two GPUs, then `setup` twice and the tree it built."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from unbounded_tests import harness  # noqa: E402
from unbounded_tests.harness import V1, MachineRoot  # noqa: E402

if os.geteuid() != 0 or not os.access("/dev", os.W_OK):
    real_mknod = harness.make_chardev

    def bind_null(path, major, minor, mode=0o666):
        try:
            real_mknod(path, major, minor, mode)
        except PermissionError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
            subprocess.run(["mount", "--bind", "/dev/null", path], check=True)
    harness.make_chardev = bind_null

# tmpfs, like the machine's /run, where there is one to write to
root = ("/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp") + "/unbounded-nvidia-demo"
subprocess.run(["rm", "-rf", root], check=True)
m = MachineRoot(tmp=root)
m.stage_debian(V1, extra_unrelated=1500)
m.stage_bin(V1)
m.stage_firmware(V1)
m.set_proc_version(V1)
m.add_control_nodes()
for i in range(2):
    m.add_gpu(i, f"0000:{0x18 + i:02x}:00.0", f"GPU-{i:08x}-1111-2222-3333-444455556666")

def show(title, cmd):
    print(f"\n=== {title}\n$ {' '.join(cmd)}", flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True)
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr)
    print(f"(exit status {r.returncode})", flush=True)
    return r

print(f"Demo machine root: {root}")
print(f"Staging: /run/host-nvidia/0 is a Debian-style host lib dir with {len(os.listdir(m.p('/run/host-nvidia/0')))} "
      "entries (nvidia/current/ with absolute symlinks); /run/host-nvidia/1 holds binaries, /2 firmware")
setup = harness.SETUP
show("First setup: builds /run/nvidia/driver", [setup, "--root", root, "--json", "setup"])
print("\n=== The driver root it built")
for dirpath, dirnames, filenames in sorted(os.walk(m.driver_root())):
    dirnames.sort()
    for n in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
        full = os.path.join(dirpath, n)
        rel = os.path.relpath(full, root)
        if os.path.islink(full):
            print(f"  /{rel} -> {os.readlink(full)}")
        else:
            st = os.stat(full)
            print(f"  /{rel}  ({oct(st.st_mode & 0o7777)}, {st.st_size} bytes)")
r = show("Second setup: nothing changed, nothing copied", [setup, "--root", root, "--json", "setup"])
res = json.loads(r.stdout)
print(f"bytes_copied={res['bytes_copied']} files_reused={res['files_reused']} unchanged={res['unchanged']}")
spec = open(m.p("/etc/cdi/nvidia.yaml")).read().splitlines()
print(f"\n=== /etc/cdi/nvidia.yaml ({len(spec)} lines), the first 40")
print("\n".join(spec[:40]))
show("verify, as the host's reconcile loop calls it", [setup, "--root", root, "verify"])
os.unlink(os.path.join(m.libdir(), f"libcuda.so.{V1}"))
show("verify after deleting libcuda from the driver root", [setup, "--root", root, "verify"])
show("setup repairs it", [setup, "--root", root, "setup"])
