#!/bin/sh
# Prepares and configures the arm64 cross build in BUILD_DIR (default build-arm64): installs what a
# fresh Debian bookworm machine lacks (the arm64 architecture, the cross g++, the :arm64 -dev
# libraries, qemu-user-static), unpacks yaml-cpp's arm64 -dev package beside the build (it is not
# Multi-Arch: same in bookworm: installing it would remove the native one), and runs meson setup with
# tests/cross/aarch64-linux-gnu.ini. Nothing here registers binfmt_misc: qemu is the exe wrapper.
set -eu
BUILD_DIR=${1:-build-arm64}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	echo "Adding the arm64 architecture to dpkg"
	$SUDO dpkg --add-architecture arm64
fi
missing=""
# gRPC's and protobuf's arm64 libraries for the consumers' helper (their code generators are the
# build machine's, from make's BUILD_DEPS).
for p in g++-aarch64-linux-gnu qemu-user-static libsystemd-dev:arm64 libmount-dev:arm64 libtomlplusplus-dev:arm64 libc6:arm64 libstdc++6:arm64 \
	libgrpc++-dev:arm64 libprotobuf-dev:arm64 protobuf-compiler protobuf-compiler-grpc; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "Installing missing Debian packages:$missing"
	"$SRC/tests/apt-install.sh" $missing
fi

mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
ASIDE="$BUILD_DIR/yaml-cpp-arm64"
if [ ! -f "$ASIDE/usr/lib/aarch64-linux-gnu/libyaml-cpp.a" ]; then
	rm -rf "$ASIDE" "$BUILD_DIR/debs"
	mkdir -p "$ASIDE" "$BUILD_DIR/debs"
	(cd "$BUILD_DIR/debs" && apt-get download libyaml-cpp-dev:arm64 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	for deb in "$BUILD_DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$ASIDE"; done
	# The .pc names /usr; point it at the unpacked tree (headers are the native package's, the same).
	sed -i "s|^prefix=.*|prefix=$ASIDE/usr|; s|^includedir=.*|includedir=/usr/include|" \
		"$ASIDE/usr/lib/aarch64-linux-gnu/pkgconfig/yaml-cpp.pc"
fi
# Debian's real arm64 NVIDIA 535 userspace (non-free) for the integration test built from it
# (tests/integration/test_debian_packages.py): fetched with a private apt state and sources list,
# so the machine's own apt configuration is neither needed nor changed.
DEBS="$BUILD_DIR/nvidia-debs"
if [ ! -f "$DEBS/.complete" ]; then
	APTDIR="$BUILD_DIR/apt"
	rm -rf "$DEBS" "$APTDIR"
	mkdir -p "$DEBS" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
	key=/usr/share/keyrings/debian-archive-keyring.gpg
	for suite in "debian bookworm" "debian bookworm-updates" "debian-security bookworm-security"; do
		set -- $suite
		echo "deb [arch=arm64 signed-by=$key] http://deb.debian.org/$1 $2 main non-free"
	done > "$APTDIR/sources.list"
	APTOPTS="-o Dir::Etc::SourceList=$APTDIR/sources.list -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists=$APTDIR/lists -o Dir::Cache=$APTDIR/cache -o APT::Architectures::=arm64"
	# Only the indexes these downloads need; one that fails to download (a mirror mid-sync) is
	# tried again, and the downloads below say whether what was fetched is enough.
	for try in 1 2 3; do
		apt-get $APTOPTS update -q && break
		echo "apt-get update failed (try $try of 3)" >&2
		sleep 5
	done
	(cd "$DEBS" && apt-get $APTOPTS download libcuda1:arm64 libnvidia-ml1:arm64 libnvidia-ptxjitcompiler1:arm64 \
		libegl-nvidia0:arm64 libglx-nvidia0:arm64 libnvidia-eglcore:arm64 libnvidia-glcore:arm64 \
		libnvidia-allocator1:arm64 nvidia-smi:arm64 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	[ "$(ls "$DEBS"/*.deb | wc -l)" = 9 ] || { echo "Failed to download Debian's arm64 NVIDIA packages" >&2; exit 1; }
	touch "$DEBS/.complete"
fi

cat > "$BUILD_DIR/cross-constants.ini" <<EOC
[constants]
yaml_cpp_pc = '$ASIDE/usr/lib/aarch64-linux-gnu/pkgconfig'
EOC
# --buildtype=release (-O3, NDEBUG): CI's release build is this one (a second native -O3 build would
# cost a full compile for the same warnings), and the arm64 tiers run what a release package ships.
# With the consumers' helper, as make's build; the CRI api.proto as the Makefile finds it.
PROTO=${CRI_API_PROTO:-/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto}
if [ ! -s "$PROTO" ]; then
	PROTO=$SRC/.cache/cri-api/api.proto
	"$SRC/consumers/fetch-cri-api.sh" "$SRC/.cache/cri-api"
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
	meson setup "$BUILD_DIR" "$SRC" --buildtype=release -Dsystem_tests=false -Dwerror="${WERROR:-false}" \
		-Dunity="${UNITY:-off}" -Dconsumers=enabled -Dcri_api_proto="$PROTO" \
		--cross-file "$BUILD_DIR/cross-constants.ini" --cross-file "$SRC/tests/cross/aarch64-linux-gnu.ini"
fi
