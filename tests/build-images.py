#!/usr/bin/python3
"""Builds the booted tiers' machine images (tests/lib/unbounded_tests/image.py's IMAGES: bookworm for
the system and package tiers, trixie and sid for the containerd tiers) into their caches, each only
when its configuration changed, one after the other. .ci/run starts it in the background, at the
lowest CPU and I/O priority, beside make check: an image build is mostly downloading and unpacking
packages, which overlaps the compile, and the tiers then find their images built (a tier that comes
to an image still being built waits on the cache's lock, then uses it; one whose build failed here
builds it again itself and reports the failure). No test machine boots while this runs (BUILDER_LOCK):
mkosi's apt runs in an nspawn container, and two nspawn containers are never run side by side. Then,
with the lock given back (debootstrap runs no container), the package tier's build chroot
(image.buildd_tree). Usage: PYTHONPATH=tests/lib tests/build-images.py [NAME...]"""

import fcntl
import subprocess
import sys
import time

from unbounded_tests.image import BUILDER_LOCK, IMAGES, base_image, buildd_tree

PACKAGE_CHROOT = "package-chroot"


def build(name, make):
    t0 = time.monotonic()
    try:
        path = make()
        print(f"image {name}: {path} ({time.monotonic() - t0:.0f} s)", flush=True)
        return 0
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(f"image {name}: failed after {time.monotonic() - t0:.0f} s: {e}", flush=True)
        return 1


def main(names):
    names = names or [*IMAGES, PACKAGE_CHROOT]
    failed = 0
    lock = open(BUILDER_LOCK, "a")  # held while images are built: test machines boot after them
    fcntl.flock(lock, fcntl.LOCK_EX)
    for name in names:
        if name != PACKAGE_CHROOT:
            failed += build(name, lambda: base_image(*IMAGES[name]))
    lock.close()
    if PACKAGE_CHROOT in names:
        failed += build(PACKAGE_CHROOT, buildd_tree)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
