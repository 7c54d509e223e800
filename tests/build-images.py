#!/usr/bin/python3
"""Builds the booted tiers' machine images (tests/lib/unbounded_tests/image.py's IMAGES: bookworm for
the system and package tiers, trixie and sid for the containerd tiers) into their caches, each only
when its configuration changed, one after the other. .ci/run starts it in the background, at the
lowest CPU and I/O priority, beside make check: an image build is mostly downloading and unpacking
packages, which overlaps the compile, and the tiers then find their images built (a tier that comes
to an image still being built waits on the cache's lock, then uses it; one whose build failed here
builds it again itself and reports the failure). No test machine boots while this runs (BUILDER_LOCK):
mkosi's apt runs in an nspawn container, and two nspawn containers are never run side by side. Usage: PYTHONPATH=tests/lib tests/build-images.py [NAME...]"""

import fcntl
import sys
import time

from unbounded_tests.image import BUILDER_LOCK, IMAGES, base_image


def main(names):
    failed = 0
    lock = open(BUILDER_LOCK, "a")  # held until the process ends: test machines boot after it
    fcntl.flock(lock, fcntl.LOCK_EX)
    for name in names or IMAGES:
        t0 = time.monotonic()
        try:
            path = base_image(*IMAGES[name])
            print(f"image {name}: {path} ({time.monotonic() - t0:.0f} s)", flush=True)
        except (RuntimeError, OSError) as e:
            print(f"image {name}: failed after {time.monotonic() - t0:.0f} s: {e}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
