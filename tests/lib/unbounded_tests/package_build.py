"""The package tier's build (tests/package/chroot-build.sh on a copy of the source tree, in the
cached buildd chroot), single-flight in a directory: whoever comes first builds there, under the
directory's lock, and whoever comes later waits for that build and takes its result, as long as it
was built from the same source (the tree's files, the CRI api.proto, the warnings flag).

  python3 -m unbounded_tests.package_build DIR
      builds into DIR ahead of the tier (CI, .ci/run: once its other compiles are done, so that the
      build runs beside the booted tiers, which mostly wait on machines, instead of after them); the
      tier (tests/package/test_package.py) takes it when UNBOUNDED_PACKAGE_AHEAD names DIR, and
      otherwise builds in a directory of its own.

A build that failed is not taken: the next caller builds again, so a failure of the environment
(apt, debootstrap, the disk) on the build made ahead is tried once more by the tier itself."""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from unbounded_tests import TESTS_DIR
from unbounded_tests.image import PACKAGE_CACHE, buildd_tree

SOURCE = os.environ.get("SOURCE_ROOT", os.path.dirname(TESTS_DIR))
CHROOT_BUILD = os.path.join(TESTS_DIR, "package", "chroot-build.sh")
TREE = "unbounded-nvidia-setup"


def source_files():
    # -z: names as they are (git quotes odd ones otherwise); a tracked file deleted in the work tree
    # is still listed by git, with nothing to copy.
    try:
        r = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True)
    except FileNotFoundError:  # no git: the walk below
        r = subprocess.CompletedProcess([], 1)
    if r.returncode == 0:
        names = (os.fsdecode(n) for n in r.stdout.split(b"\0") if n)
        return [n for n in names if os.path.lexists(os.path.join(SOURCE, n))]
    skip = ("build", ".git", "debian/.debhelper")
    out = []
    for dirpath, dirnames, filenames in os.walk(SOURCE):
        rel = os.path.relpath(dirpath, SOURCE)
        dirnames[:] = [d for d in dirnames if not os.path.normpath(os.path.join(rel, d)).startswith(skip)]
        out += [os.path.normpath(os.path.join(rel, f)) for f in filenames]
    return out


def werror():
    # WERROR=true (CI's builds, see the Makefile): Debian's flags with warnings as errors.
    return os.environ.get("WERROR") == "true"


def source_key(files, proto):
    """What the build's result depends on that can differ between its two callers: every file of
    the tree (name, mode and bytes), the api.proto and the warnings flag."""
    h = hashlib.sha256(f"werror={werror()}\0".encode())
    if proto:  # outside the tree, perhaps a link: its content
        with open(proto, "rb") as f:
            h.update(f"{proto}\0".encode() + hashlib.sha256(f.read()).digest())
    for rel in sorted(files):
        path = os.path.join(SOURCE, rel)
        st = os.lstat(path)
        h.update(f"{rel}\0{st.st_mode:o}\0".encode())
        if os.path.islink(path):
            h.update(os.readlink(path).encode())
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        h.update(b"\0")
    return h.hexdigest()


def build(work, files, proto):
    """Builds FILES of the tree and the api.proto PROTO ("" for none) into WORK (the tree as
    WORK/unbounded-nvidia-setup, the .debs beside it) and returns {"returncode", "log", "message"}."""
    src = os.path.join(work, TREE)
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        shutil.copy2(os.path.join(SOURCE, rel), os.path.join(src, rel), follow_symlinks=False)
    # bookworm has no package with the CRI's api.proto: the builder's step that README and
    # debian/rules name (consumers/fetch-cri-api.sh debian/cri-api), from the file this build used.
    if proto:
        os.makedirs(os.path.join(src, "debian/cri-api"))
        shutil.copy2(proto, os.path.join(src, "debian/cri-api/api.proto"))
    env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=%d%s" % (os.cpu_count(), " werror" if werror() else ""))
    t0 = time.monotonic()
    try:
        base = buildd_tree()
    except RuntimeError as e:
        return {"returncode": 1, "log": str(e), "message": "the build chroot could not be made"}
    t1 = time.monotonic()
    r = subprocess.run([CHROOT_BUILD, base, work, os.path.join(PACKAGE_CACHE, "archives")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return {"returncode": r.returncode, "log": r.stdout,
            "message": f"build chroot ready in {t1 - t0:.0f} s, package built in it in {time.monotonic() - t1:.0f} s "
                       f"(exit status {r.returncode})"}


def build_once(directory):
    """The result of the build in DIRECTORY, made now unless a build of the same source is there
    (waiting for one under way): (result, work directory, whether it was taken from an earlier
    caller's build)."""
    os.makedirs(directory, exist_ok=True)
    files = source_files()
    proto = os.environ.get("CRI_API_PROTO", "")
    proto = proto if os.path.isfile(proto) else ""
    key = source_key(files, proto)
    stamp = os.path.join(directory, "result.json")
    work = os.path.join(directory, "work")
    with open(os.path.join(directory, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(stamp):
            with open(stamp) as f:
                result = json.load(f)
            if result.get("key") == key and result.get("returncode") == 0:
                return result, work, True
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        result = dict(build(work, files, proto), key=key)
        with open(stamp + ".tmp", "w") as f:
            json.dump(result, f)
        os.rename(stamp + ".tmp", stamp)
        return result, work, False


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 -m unbounded_tests.package_build DIR")
    result, _, _ = build_once(sys.argv[1])
    print(result["message"])
    sys.exit(0 if result["returncode"] == 0 else 1)
