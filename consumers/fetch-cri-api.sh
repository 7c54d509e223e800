#!/bin/sh
# Downloads the CRI's api.proto from Debian trixie's golang-github-kubernetes-cri-api-dev (bookworm ships
# no CRI definitions) into DEST: the build makes unbounded-nvidia-consumers' CRI client from it (make
# build passes it as -Dcri_api_proto), and the containerd tier its kubelet stand-in.
# apt runs with a private state and sources list (trixie main only), as tests/debian/fetch-nvidia-debs.sh
# does: the machine's apt configuration is neither needed nor changed. Exits non-zero, loudly, when the
# package or the file inside it cannot be had.
set -eu
DEST=$1
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PROTO=usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto
[ -s "$DEST/api.proto" ] && exit 0
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
# Builds made side by side (CI's compiles ahead) may ask at once: one fetches, the others wait for it.
exec 9<"$DEST"
flock 9
[ -s "$DEST/api.proto" ] && exit 0
APTDIR="$DEST/.apt"
rm -rf "$APTDIR"
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/deb"
echo "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main" > "$APTDIR/sources.list"
APTOPTS="-o Dir::Etc::SourceList=$APTDIR/sources.list -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists=$APTDIR/lists -o Dir::Cache=$APTDIR/cache -o Acquire::Retries=3"
apt-get $APTOPTS update -q
(cd "$APTDIR/deb" && apt-get $APTOPTS download golang-github-kubernetes-cri-api-dev)
deb=$(ls "$APTDIR"/deb/*.deb)
dpkg-deb -x "$deb" "$APTDIR/x"
if [ ! -s "$APTDIR/x/$PROTO" ]; then
	echo "$(basename "$deb") has no $PROTO" >&2
	exit 1
fi
cp "$APTDIR/x/$PROTO" "$DEST/api.proto.tmp"
basename "$deb" > "$DEST/source"
mv "$DEST/api.proto.tmp" "$DEST/api.proto"
rm -rf "$APTDIR"
