#!/bin/sh
# Downloads Debian's containerd of trixie (1.7) and sid (2.x) and unpacks each into DEST/<suite>
# (default build/containerd): verify asks the machine's containerd for its configuration
# (`containerd config dump`), and the tests' machine roots get the real binary to ask
# (tests/lib/unbounded_tests/containerd_binary.py). apt runs with a private state and sources list,
# as tests/debian/fetch-nvidia-debs.sh does; versions are chosen by suite, never named.
set -eu
DEST=${1:-build/containerd}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

WANT=$(sed -n '/^fetch [a-z]/,$p' "$0" | cksum | cut -d' ' -f1)
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
[ "$(cat "$DEST/.complete" 2>/dev/null)" = "$WANT" ] && exit 0

APTDIR="$DEST/.apt"
rm -rf "$APTDIR"
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
key=/usr/share/keyrings/debian-archive-keyring.gpg
for suite in trixie sid; do
	echo "deb [arch=amd64 signed-by=$key] $MIRROR $suite main"
done > "$APTDIR/sources.list"
APTOPTS="-o Dir::Etc::SourceList=$APTDIR/sources.list -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists=$APTDIR/lists -o Dir::Cache=$APTDIR/cache \
	-o APT::Architectures::=amd64 -o Acquire::Retries=3 -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false"

updated=false
for try in 1 2 3; do
	if apt-get $APTOPTS update -q; then
		updated=true
		break
	fi
	echo "apt-get update failed (try $try of 3), trying again" >&2
	sleep 5
done
$updated || echo "apt-get update did not succeed for every index; downloading what the indexes allow" >&2

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
	dpkg-deb -x "$deb" "$dir"
	rm -rf "$DEST/$1.deb.d"
	"$dir/usr/bin/containerd" --version >/dev/null
}

fetch trixie
fetch sid
rm -rf "$APTDIR"
echo "$WANT" > "$DEST/.complete"
