#!/bin/sh
# Builds the Debian package as a Debian buildd does: in a minimal bookworm tree with only
# the package's Build-Depends installed, as an unprivileged user, with its tests (no nocheck).
#
#   chroot-build.sh BASE WORK ARCHIVES    (root)
#     BASE      a `debootstrap --variant=buildd bookworm` tree (Essential, apt, build-essential:
#               what a buildd's chroot holds before a build); only read, the lower layer of an overlay
#     WORK      holds the source tree as unbounded-nvidia-setup/; the .deb and the other build
#               results land beside it, the overlay's layers in WORK/.chroot-*
#     ARCHIVES  apt's download cache, kept between runs (/var/cache/apt/archives in the tree)
#   DEB_BUILD_OPTIONS is passed on to dpkg-buildpackage; nothing else of the caller's environment is.
#
# The Build-Depends are installed with `apt-get build-dep` on the source directory, apt's own
# reading of debian/control: no source package to make, no helper package (mk-build-deps needs
# devscripts and equivs in the tree, which would then be there for the build to find), no
# builder configuration (sbuild needs a schroot and its own user setup, pbuilder a base tarball
# unpacked on each build). Recommends are not installed (a buildd does not install them either),
# so a missing Build-Depends cannot hide behind another package's Recommends.
# The script runs itself again in its own mount and PID namespaces: its mounts and any process a
# build leaves behind go with them.
set -eu

if [ "${CHROOT_BUILD_NS:-}" != 1 ]; then
	exec env CHROOT_BUILD_NS=1 unshare --mount --pid --fork --propagation private sh "$0" "$@"
fi

base=$1 work=$2 archives=$3
start=$(date +%s)
say() { echo "chroot-build: $* ($(($(date +%s) - start)) s in)"; }
root=$work/.chroot-root
mkdir -p "$root" "$work/.chroot-upper" "$work/.chroot-overlay-work" "$archives"

say "an overlay on $base"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/.chroot-upper,workdir=$work/.chroot-overlay-work" "$root"
mount -t proc proc "$root/proc"
# /dev: the few nodes a build uses, not the host's /dev
mount -t tmpfs -o mode=0755,nosuid dev "$root/dev"
for node in null zero full random urandom tty; do
	touch "$root/dev/$node"
	mount --bind "/dev/$node" "$root/dev/$node"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir -p "$root/build"
mount --bind "$work" "$root/build"
mount --bind "$archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No package's maintainer script starts a service here (what pbuilder and sbuild do too).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"

in_root() {
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# A mirror mid-sync fails one index now and then (tests/apt-install.sh): tried three times, then
# left to build-dep to judge.
for try in 1 2 3; do
	in_root apt-get update -q && break
	say "apt-get update failed (try $try of 3)"
	[ "$try" = 3 ] || sleep 5
done
say "apt-get build-dep"
in_root apt-get build-dep -y -q --no-install-recommends /build/unbounded-nvidia-setup

in_root useradd --create-home --home-dir /home/builder --shell /bin/sh builder
in_root chown builder: /build
in_root chown -R builder: /build/unbounded-nvidia-setup
# The build has no network, as on Debian's buildds (Policy 4.9): a network namespace of its own with
# only the loopback interface, up (the host's ip, iproute2: the tree need not have it).
say "dpkg-buildpackage -us -uc -b as builder, offline, DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-}"
unshare --net sh -c 'ip link set lo up && exec "$@"' sh \
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
	runuser -u builder -- env HOME=/home/builder USER=builder LOGNAME=builder \
	DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-}" \
	sh -c 'cd /build/unbounded-nvidia-setup && exec dpkg-buildpackage -us -uc -b'
say "built"
