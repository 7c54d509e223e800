"""The system tests' machine image: built once with mkosi from mkosi.conf.d/ and cached outside the
repository, keyed by the configuration, so it is rebuilt exactly when mkosi.conf.d/ changes. Each test
machine is a copy of it with the project installed on top by `meson install --destdir`."""

import fcntl
import hashlib
import os
import shutil
import subprocess

from . import TESTS_DIR

SOURCE = os.environ.get("SOURCE_ROOT", os.path.dirname(TESTS_DIR))
CACHE = os.environ.get("UNBOUNDED_TEST_CACHE", "/var/tmp/unbounded-nvidia-test")
CONTAINERD_CACHE = os.environ.get("UNBOUNDED_CONTAINERD_CACHE", "/var/tmp/unbounded-nvidia-containerd")
CONTAINERD2_CACHE = os.environ.get("UNBOUNDED_CONTAINERD2_CACHE", "/var/tmp/unbounded-nvidia-containerd2")
ORACLE_CACHE = os.environ.get("UNBOUNDED_ORACLE_CACHE", "/var/tmp/unbounded-nvidia-oracle")
# Held by tests/build-images.py while it builds images ahead of the tiers: mkosi runs apt in a
# systemd-nspawn container, and a test machine is never booted beside another nspawn (machine.py).
BUILDER_LOCK = os.path.join(os.environ.get("UNBOUNDED_IMAGES_LOCK_DIR", "/var/tmp"), "unbounded-nvidia-build-images.lock")
# The booted tiers' images: the directory whose mkosi.conf.d/ makes it, and where it is cached.
IMAGES = {
    "bookworm": (SOURCE, CACHE),  # the system and package tiers
    "trixie": (os.path.join(SOURCE, "tests", "containerd"), CONTAINERD_CACHE),  # containerd 1.7
    "sid": (os.path.join(SOURCE, "tests", "containerd", "sid"), CONTAINERD2_CACHE),  # containerd 2.x
    # The differential oracle (tests/oracle/): containerd and the CDI library with Debian's Go
    "oracle-trixie": (os.path.join(SOURCE, "tests", "oracle", "trixie"), ORACLE_CACHE + "-trixie"),
    "oracle-sid": (os.path.join(SOURCE, "tests", "oracle", "sid"), ORACLE_CACHE + "-sid"),
}


def config_key(conf):
    """The cache key of the image `conf` (a mkosi.conf.d/) makes: its files, the apt.conf beside it
    (see base_image) and mkosi's version."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(conf):
        dirnames.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            h.update(os.path.relpath(p, conf).encode() + b"\0" + open(p, "rb").read() + b"\0")
    apt_conf = os.path.join(os.path.dirname(conf), "apt.conf")
    if os.path.exists(apt_conf):
        h.update(b"apt.conf\0" + open(apt_conf, "rb").read() + b"\0")
    h.update(subprocess.run(["mkosi", "--version"], capture_output=True, text=True).stdout.encode())
    return h.hexdigest()[:16]


_failures = {}


def base_image(workdir=SOURCE, cache=CACHE):
    """Path of the cached base image, building it (about a minute) when the configuration changed.
    `workdir` holds the mkosi.conf.d/ to build (the containerd tier has its own); `cache` is where
    that image is kept."""
    if workdir in _failures:  # one failed build per run is enough: every test reports it
        raise RuntimeError(_failures[workdir])
    os.makedirs(cache, exist_ok=True)
    key = config_key(os.path.join(workdir, "mkosi.conf.d"))
    image = os.path.join(cache, f"image-{key}")
    with open(os.path.join(cache, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(image, "usr/lib/systemd/systemd")):
            return image
        for old in os.listdir(cache):
            if old.startswith("image-"):
                shutil.rmtree(os.path.join(cache, old), ignore_errors=True)
        for leftover in (image, image + ".manifest"):
            if os.path.lexists(leftover):
                shutil.rmtree(leftover, ignore_errors=True) if os.path.isdir(leftover) else os.unlink(leftover)
        # mkosi 14 runs apt in systemd-nspawn: like every nspawn here it needs its own mount namespace
        # with a tmpfs /run, and must keep our unit.
        # mkosi 14 reads mkosi.conf.d/ from the working directory (not from -C), so run it there.
        cmd = (f"mount -t tmpfs tmpfs /run && cd '{workdir}' && mkosi --nspawn-keep-unit --force "
               f"--output-dir '{cache}' --output '{image}' build")
        log = os.path.join(cache, "mkosi.log")
        # An apt.conf beside mkosi.conf.d/ reaches the apt that mkosi runs (which sees an empty /etc/apt).
        env = dict(os.environ)
        if os.path.exists(os.path.join(workdir, "apt.conf")):
            env["APT_CONFIG"] = os.path.join(workdir, "apt.conf")
        with open(log, "w") as f:
            r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd], stdout=f, stderr=subprocess.STDOUT, env=env)
        if r.returncode != 0 or not os.path.isfile(os.path.join(image, "usr/lib/systemd/systemd")):
            tail = open(log).read()[-3000:]
            _failures[workdir] = f"mkosi build of a directory image failed ({r.returncode}), log {log}:\n{tail}"
            raise RuntimeError(_failures[workdir])
        return image


# The package tier's build chroot (tests/package/chroot-build.sh): what a Debian buildd's chroot holds
# before a build, Essential, apt and build-essential, and nothing of this machine's.
PACKAGE_CACHE = os.environ.get("UNBOUNDED_PACKAGE_CACHE", "/var/tmp/unbounded-nvidia-package")
BOOKWORM_MIRROR = "http://deb.debian.org/debian"


def buildd_tree(cache=PACKAGE_CACHE):
    """Path of `debootstrap --variant=buildd bookworm`, made once (about two minutes cold, with its
    package lists) and cached: the package tier only reads it, as the lower layer of an overlay. It
    is made again when debootstrap's version changes; remove the cache to start from today's
    bookworm (apt-get build-dep takes the Build-Depends from today's lists in any case)."""
    os.makedirs(cache, exist_ok=True)
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "debootstrap"], capture_output=True, text=True).stdout
    key = hashlib.sha256(f"bookworm buildd {BOOKWORM_MIRROR} {version}".encode()).hexdigest()[:16]
    root = os.path.join(cache, f"bookworm-buildd-{key}")
    with open(os.path.join(cache, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(root, ".complete")):
            return root
        for old in os.listdir(cache):
            if old.startswith("bookworm-buildd-"):
                shutil.rmtree(os.path.join(cache, old), ignore_errors=True)
        log = os.path.join(cache, "debootstrap.log")
        with open(log, "w") as f:
            r = subprocess.run(["debootstrap", "--variant=buildd", "bookworm", root, BOOKWORM_MIRROR],
                               stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise RuntimeError(f"debootstrap of the build chroot failed ({r.returncode}), log {log}:\n{open(log).read()[-2000:]}")
        # debootstrap's downloads are not part of the tree (the tier binds its own apt cache there)
        subprocess.run(["chroot", root, "apt-get", "clean"], check=True)
        open(os.path.join(root, ".complete"), "w").close()
        return root
