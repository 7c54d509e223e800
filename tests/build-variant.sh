#!/bin/sh
# The builds a packager or CI makes besides `make check`'s, each in its own directory:
#   release     meson's --buildtype=release (-O3), the unit tier
#   plain       --buildtype=plain with Debian's own flags (dpkg-buildflags, DEB_BUILD_MAINT_OPTIONS
#               hardening=+all as debian/rules sets it: what dh's meson build system does), the unit tier
#   sanitizers  -Db_sanitize=address,undefined, the unit and integration tiers with leak detection on
#               and every report fatal (halt_on_error); the tests know (UNBOUNDED_SANITIZED=1) that
#               peak RSS is the sanitizer's and that an LD_PRELOAD shim must come after its runtime
# Usage: tests/build-variant.sh VARIANT [BUILD_DIR]. WERROR=true|false (default true: CI's builds
# fail on any warning; the project's own default is false, so a user's newer compiler never breaks).
# BUILD_ONLY=1 configures and compiles, and runs nothing (.ci/run compiles ahead, in the background).
# UNITY=on makes a unity build (CI's: the Makefile says why); off by default.
set -eu
VARIANT=$1
DIR=${2:-build-$VARIANT}
WERROR=${WERROR:-true}
SRC=$(cd "$(dirname "$0")/.." && pwd)
COMMON="-Dwerror=$WERROR -Dsystem_tests=false -Dunity=${UNITY:-off}"

case "$VARIANT" in
release)
	[ -f "$DIR/build.ninja" ] || meson setup "$DIR" "$SRC" --buildtype=release $COMMON
	meson compile -C "$DIR"
	[ "${BUILD_ONLY:-}" = 1 ] && exit 0
	meson test -C "$DIR" --suite unit --print-errorlogs
	;;
plain)
	if [ ! -f "$DIR/build.ninja" ]; then
		eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
		echo "dpkg-buildflags: CXXFLAGS=$CXXFLAGS LDFLAGS=$LDFLAGS CPPFLAGS=$CPPFLAGS"
		meson setup "$DIR" "$SRC" --buildtype=plain $COMMON
	fi
	meson compile -C "$DIR"
	[ "${BUILD_ONLY:-}" = 1 ] && exit 0
	meson test -C "$DIR" --suite unit --print-errorlogs
	;;
sanitizers)
	# b_lundef=false: the sanitizer runtimes resolve symbols at load time.
	# -O0 (buildtype debug): at -O2 g++ takes four times as long to compile with the sanitizers, and
	# the tiers spend their time in process starts, not in our code.
	# With the consumers' helper, as make's build: its CRI client runs under the sanitizers in the
	# integration tier too. The CRI api.proto as the Makefile finds it (trixie's package, else fetched).
	PROTO=${CRI_API_PROTO:-/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto}
	if [ ! -s "$PROTO" ]; then
		PROTO=$SRC/.cache/cri-api/api.proto
		"$SRC/consumers/fetch-cri-api.sh" "$SRC/.cache/cri-api"
	fi
	[ -f "$DIR/build.ninja" ] || meson setup "$DIR" "$SRC" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false $COMMON \
		-Dconsumers=enabled -Dcri_api_proto="$PROTO"
	meson compile -C "$DIR"
	[ "${BUILD_ONLY:-}" = 1 ] && exit 0
	# The real-host tests' packages: make check's download when there is one (hard links), else fetched.
	if [ ! -f "$DIR/nvidia-debs/.complete" ] && [ -f "$SRC/build/nvidia-debs/.complete" ]; then
		rm -rf "$DIR/nvidia-debs"
		cp -al "$SRC/build/nvidia-debs" "$DIR/nvidia-debs"
	fi
	"$SRC/tests/debian/fetch-nvidia-debs.sh" "$DIR/nvidia-debs"
	"$SRC/tests/debian/fetch-containerd.sh" "$SRC/.cache/containerd"
	# Every report also goes to a file of its own: a finding in a run whose test expects a failure
	# (exit 1, a message on stderr) would otherwise pass for the failure the test wanted.
	REPORTS="$DIR/sanitizer-reports"
	rm -rf "$REPORTS"
	mkdir -p "$REPORTS"
	rc=0
	UNBOUNDED_SANITIZED=1 \
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:exitcode=86:log_path=$REPORTS/asan \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86:log_path=$REPORTS/ubsan \
		meson test -C "$DIR" --suite unit --suite integration --print-errorlogs --timeout-multiplier 3 || rc=$?
	# An empty file is no report: a process the tests kill -9 on purpose can be stopped after the
	# runtime opened its log and before it wrote a line (seen once in the kill -9 trials).
	if [ -n "$(find "$REPORTS" -type f -size +0c)" ]; then
		echo "Sanitizer reports:" >&2
		for f in $(find "$REPORTS" -type f -size +0c); do echo "== $f" >&2; head -50 "$f" >&2; done
		exit 1
	fi
	exit $rc
	;;
*)
	echo "usage: $0 release|plain|sanitizers [BUILD_DIR]" >&2
	exit 2
	;;
esac
