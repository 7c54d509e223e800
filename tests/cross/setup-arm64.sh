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
	$SUDO apt-get update -q
fi
missing=""
for p in g++-aarch64-linux-gnu qemu-user-static libsystemd-dev:arm64 libmount-dev:arm64 libc6:arm64 libstdc++6:arm64; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "Installing missing Debian packages:$missing"
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
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
cat > "$BUILD_DIR/cross-constants.ini" <<EOC
[constants]
yaml_cpp_pc = '$ASIDE/usr/lib/aarch64-linux-gnu/pkgconfig'
EOC
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
	meson setup "$BUILD_DIR" "$SRC" -Dsystem_tests=false \
		--cross-file "$BUILD_DIR/cross-constants.ini" --cross-file "$SRC/tests/cross/aarch64-linux-gnu.ini"
fi
