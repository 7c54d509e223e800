#!/bin/sh
# Downloads Debian's real NVIDIA userspace packages (non-free) into DEST (default build/nvidia-debs),
# one directory per host the integration tests build from them (tests/integration/test_real_hosts.py):
#   bookworm-535        the 535 driver with OpenCL and NVVM (what nvidia-driver-full and the CUDA
#                       toolkit pull in), nvidia-smi and nvidia-alternative, whose postinst the tests
#                       replay to make the alternatives links, and the EGL, Vulkan and OpenCL ICD files
#   bookworm-535-i386   the 32-bit libraries a multiarch host adds
#   bookworm-535-firmware  its GSP firmware (non-free-firmware)
#   bookworm-tesla-535  the datacenter flavour (nvidia/tesla-535/)
#   trixie-550          the next release's driver, through the same private apt configuration
# apt runs with a private state and sources list: the machine's apt configuration is neither needed
# nor changed. Versions are chosen by suite, never named: a point release changes them, the tests
# read them from the files. Only the non-free indexes are fetched, and an index that fails to download
# (a mirror mid-sync) is tried again; the downloads themselves must all succeed, or this fails loudly.
set -eu
DEST=${1:-build/nvidia-debs}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What this script fetches; a download made for another list is fetched again.
WANT=$(sed -n '/^fetch [a-z]/,$p' "$0" | cksum | cut -d' ' -f1)
ARCHES="amd64 i386"
SOURCES="deb [arch=amd64,i386 signed-by=@KEY@] @MIRROR@ bookworm non-free
deb [arch=amd64,i386 signed-by=@KEY@] @MIRROR@ trixie non-free
deb [arch=amd64 signed-by=@KEY@] @MIRROR@ bookworm non-free-firmware"
. "$(dirname "$0")/private-apt.sh"
[ "$DONE" = 1 ] && exit 0

fetch() {  # fetch DIR PACKAGE...
	dir="$DEST/$1"
	shift
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$dir" && apt-get $APTOPTS download "$@" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	got=$(ls "$dir"/*.deb 2>/dev/null | wc -l)
	if [ "$got" != "$#" ]; then
		echo "Failed to download Debian's NVIDIA packages for $(basename "$dir"): $got of $#" >&2
		exit 1
	fi
}

fetch bookworm-535 \
	libcuda1/bookworm libnvidia-ml1/bookworm libnvidia-ptxjitcompiler1/bookworm libnvidia-pkcs11-openssl3/bookworm \
	libnvidia-nvvm4/bookworm nvidia-opencl-icd/bookworm libegl-nvidia0/bookworm libglx-nvidia0/bookworm \
	libnvidia-eglcore/bookworm libnvidia-glcore/bookworm libnvidia-allocator1/bookworm \
	nvidia-smi/bookworm nvidia-alternative/bookworm \
	nvidia-egl-common/bookworm nvidia-vulkan-common/bookworm nvidia-opencl-common/bookworm
fetch bookworm-535-i386 \
	libcuda1:i386/bookworm libnvidia-ml1:i386/bookworm libnvidia-ptxjitcompiler1:i386/bookworm
fetch bookworm-535-firmware firmware-nvidia-gsp/bookworm
fetch bookworm-tesla-535 \
	libnvidia-tesla-535-cuda1/bookworm libnvidia-tesla-535-ml1/bookworm libnvidia-tesla-535-ptxjitcompiler1/bookworm \
	libnvidia-tesla-535-nvvm4/bookworm nvidia-tesla-535-smi/bookworm nvidia-tesla-535-alternative/bookworm
fetch trixie-550 \
	libcuda1/trixie libnvidia-ml1/trixie libnvidia-ptxjitcompiler1/trixie libnvidia-nvvm4/trixie \
	nvidia-smi/trixie nvidia-alternative/trixie
rm -rf "$APTDIR"
echo "$WANT" > "$DEST/.complete"
