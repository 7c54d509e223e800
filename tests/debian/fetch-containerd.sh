#!/bin/sh
# Downloads Debian's containerd of trixie (1.7) and sid (2.x) and unpacks each into DEST/<suite>
# (default build/containerd): verify asks the machine's containerd for its configuration
# (`containerd config dump`), and the tests' machine roots get the real binary to ask
# (MachineRoot.install_containerd in tests/lib/unbounded_tests/harness.py). apt runs with a private
# state and sources list (private-apt.sh); versions are chosen by suite, never named.
set -eu
DEST=${1:-build/containerd}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

WANT=$(sed -n '/^fetch [a-z]/,$p' "$0" | cksum | cut -d' ' -f1)
ARCHES=amd64
SOURCES="deb [arch=amd64 signed-by=@KEY@] @MIRROR@ trixie main
deb [arch=amd64 signed-by=@KEY@] @MIRROR@ sid main"
. "$(dirname "$0")/private-apt.sh"
[ "$DONE" = 1 ] && exit 0

fetch() {  # fetch SUITE: its containerd, unpacked
	dir="$DEST/$1"
	rm -rf "$dir" "$DEST/$1.deb.d"
	mkdir -p "$DEST/$1.deb.d"
	(cd "$DEST/$1.deb.d" && apt-get $APTOPTS download "containerd/$1" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	deb=$(ls "$DEST/$1.deb.d"/*.deb 2>/dev/null | head -1)
	if [ -z "$deb" ]; then
		echo "Failed to download Debian's containerd of $1" >&2
		exit 1
	fi
	dpkg-deb -x "$deb" "$DEST/$1.deb.d/x"
	mkdir -p "$dir/usr/bin"
	mv "$DEST/$1.deb.d/x/usr/bin/containerd" "$dir/usr/bin/"  # the shims and ctr are not run
	rm -rf "$DEST/$1.deb.d"
	"$dir/usr/bin/containerd" --version >/dev/null
}

fetch trixie
fetch sid
rm -rf "$APTDIR"
echo "$WANT" > "$DEST/.complete"
