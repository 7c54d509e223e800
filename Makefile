# Two entry points for people and CI; both install what a fresh Debian bookworm machine lacks.
#   make demo    build, assemble a demo machine root, run setup on it, show the result
#   make check   build and run every meson test suite: unit, format, integration, system, consumer,
#                oracle, stateful, containerd, package, tools
#   make check-arm64   cross-build for arm64 (--buildtype=release) and run the unit and integration
#                      tiers under qemu-user
#   make check-builds  a packager's builds: --buildtype=release, and plain with dpkg-buildflags; unit tier
#                      (not in CI: the arm64 tier is its release build, the package tier its plain one)
#   make check-sanitizers  ASan+UBSan build, unit and integration tiers, every report fatal
#   make check-fuzz    every libFuzzer target briefly, and a parser broken on purpose caught (fuzz/)
#   make soak          the randomized tiers with fresh seeds (not in CI): stateful for SOAK_MINUTES (60),
#                      beside it the oracle's four releases for SOAK_MINUTES together
#   make gpu-check     on a machine with an NVIDIA GPU and driver only (never CI): the real thing
BUILD ?= build
# Warnings are errors in CI's builds (CI=true), never in a user's: a newer compiler's new warning must
# not break theirs.
WERROR ?= $(if $(CI),true,false)
export WERROR
# CI's build is optimized as a user's is, without the debug information nobody reads there: -g is
# about a quarter of each compile. A user's build keeps it (debugoptimized), but for the CRI client's
# generated code and Catch2's runner, which never have it (consumers/ and tests/unit/meson.build).
DEBUG_INFO ?= $(if $(CI),false,true)
# CI's builds are unity builds (meson's -Dunity=on: four files compiled as one, so nlohmann/json's,
# yaml-cpp's and Catch2's headers are parsed a quarter as often), all but the package's, which is
# Debian's own build file by file and so still finds a file that leaves out an include. A user's
# builds compile file by file (an edit rebuilds one file). tests/build-variant.sh and
# tests/cross/setup-arm64.sh read it too.
UNITY ?= $(if $(CI),on,off)
export UNITY
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Build and test dependencies, all from Debian bookworm main.
# The consumers helper's CRI client: gRPC's C++ library and code generator, protobuf's; the CRI's
# api.proto itself is in no bookworm package (consumers/fetch-cri-api.sh fetches trixie's).
BUILD_DEPS := meson ninja-build g++ pkg-config libsystemd-dev libmount-dev nlohmann-json3-dev \
	libyaml-cpp-dev libtomlplusplus-dev catch2 systemd scdoc \
	libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
# systemd-journal-remote: the unit tier writes a journal file for the sd-journal reader of nvidia-gridd.
# clang-format-14: the format suite holds the C++ files to .clang-format.
TEST_DEPS := python3 python3-jsonschema python3-yaml python3-hypothesis util-linux strace systemd-journal-remote clang-format-14
# The system tier boots a mkosi image with systemd-nspawn.
SYSTEM_DEPS := systemd-container mkosi debootstrap
# The package tier builds the .deb in a debootstrapped bookworm chroot that holds only its Build-Depends
# (tests/package/chroot-build.sh: debhelper and the rest are installed there, not here); lintian checks
# the .deb here, man-db and groff-base render the man pages; iproute2 brings up the offline build's
# loopback.
PACKAGE_DEPS := debootstrap iproute2 dpkg-dev lintian man-db groff-base git
# The fleet tests check the metrics files with promtool and scrape them with node_exporter.
FLEET_DEPS := prometheus prometheus-node-exporter
# The consumer tier runs containers from the spec with Debian's podman (and runc: crun 1.8 refuses
# this machine's cgroup v1 hierarchy).
CONSUMER_DEPS := podman runc
# The containerd tier makes its CRI client from the CRI's api.proto at test time and runs it here.
CONTAINERD_DEPS := protobuf-compiler python3-grpcio python3-protobuf binutils
# The fuzz tier builds its libFuzzer targets with Debian's clang 14 and its sanitizer runtimes.
FUZZ_DEPS := clang-14 libclang-rt-14-dev

.PHONY: all deps all-deps demo check check-arm64 check-builds check-sanitizers gpu-check build clean fuzz-build fuzz check-fuzz soak

all: build

deps:
	@missing=""; for p in $(BUILD_DEPS) $(TEST_DEPS) $(EXTRA_DEPS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages:$$missing"; \
		tests/apt-install.sh $$missing || exit 1; \
	fi

# Every tier's Debian packages at once: .ci/run installs them first, so the builds it runs in the
# background never wait for apt's lock.
all-deps: EXTRA_DEPS = $(SYSTEM_DEPS) $(PACKAGE_DEPS) $(FLEET_DEPS) $(CONSUMER_DEPS) $(CONTAINERD_DEPS) $(FUZZ_DEPS)
all-deps: deps

# The CRI's api.proto, where Debian installs it (trixie and later), else fetched once into .cache/.
CRI_API_PROTO ?= $(firstword $(wildcard /usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto) $(CURDIR)/.cache/cri-api/api.proto)

$(BUILD)/build.ninja:
	[ -s $(CRI_API_PROTO) ] || consumers/fetch-cri-api.sh $(dir $(CRI_API_PROTO))
	meson setup $(BUILD) -Dwerror=$(WERROR) -Ddebug=$(DEBUG_INFO) -Dunity=$(UNITY) -Dconsumers=enabled -Dcri_api_proto=$(CRI_API_PROTO)

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

demo: build
	tests/demo.sh $(BUILD)

check: EXTRA_DEPS = $(SYSTEM_DEPS) $(PACKAGE_DEPS) $(FLEET_DEPS) $(CONSUMER_DEPS) $(CONTAINERD_DEPS)
check: build
	tests/debian/fetch-nvidia-debs.sh $(BUILD)/nvidia-debs
	tests/debian/fetch-containerd.sh .cache/containerd
	meson test -C $(BUILD) --print-errorlogs

# arm64 (GB300 hosts): Debian's cross g++ and :arm64 libraries, qemu-user-static as the exe wrapper
# (no binfmt_misc), in its own build directory. tests/cross/setup-arm64.sh installs what is missing.
BUILD_ARM64 ?= build-arm64
check-arm64: deps
	tests/cross/setup-arm64.sh $(BUILD_ARM64)
	meson compile -C $(BUILD_ARM64)
	tests/debian/fetch-containerd.sh .cache/containerd
	meson test -C $(BUILD_ARM64) --suite unit --suite integration --print-errorlogs

check-builds: deps
	tests/build-variant.sh release
	tests/build-variant.sh plain

check-sanitizers: EXTRA_DEPS = $(FLEET_DEPS)
check-sanitizers: deps
	tests/build-variant.sh sanitizers

# The fuzz tier (fuzz/README.md): one libFuzzer target per parser, clang 14 with ASan and UBSan, in
# its own build directory. `make fuzz` runs each FUZZ_SECONDS (FUZZ_TARGETS= picks some); check-fuzz
# runs each CHECK_FUZZ_SECONDS, then proves on a parser broken on purpose that the tier finds its bug.
BUILD_FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS ?= 5
# -O0 halves the compile (UBSan's checks at -O1 double it), which CI's cold budget needs; for long
# runs a build with FUZZ_OPT=-O1 (in a fresh BUILD_FUZZ) executes about twice as fast.
FUZZ_OPT ?= -O0
$(BUILD_FUZZ)/build.ninja:
	CXX=clang++-14 meson setup $(BUILD_FUZZ) -Dfuzzing=true -Dtests=false -Dman=disabled -Dstatic_cxx_runtime=false \
		-Dbuildtype=plain -Db_ndebug=false '-Dcpp_args=$(FUZZ_OPT) -gline-tables-only' -Dwerror=$(WERROR) -Dunity=$(UNITY)

fuzz-build: EXTRA_DEPS = $(FUZZ_DEPS)
fuzz-build: deps $(BUILD_FUZZ)/build.ninja
	meson compile -C $(BUILD_FUZZ) fuzz-targets

# Seeds from Debian's NVIDIA packages too, when they were fetched (make check does).
FUZZ_DEBS ?= $(BUILD)/nvidia-debs
fuzz: fuzz-build
	if [ -d $(FUZZ_DEBS)/bookworm-535 ]; then fuzz/deb-seeds.py $(FUZZ_DEBS) $(BUILD_FUZZ)/nvidia-debs-seeds; fi
	fuzz/run-fuzzers.py $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

check-fuzz: fuzz-build
	fuzz/run-fuzzers.py $(BUILD_FUZZ) $(CHECK_FUZZ_SECONDS)
	fuzz/run-fuzzers.py --expect-failure $(BUILD_FUZZ) $(CHECK_FUZZ_SECONDS) mountinfo-broken

# Long runs of the randomized tiers with fresh seeds, side by side for SOAK_MINUTES: the stateful
# sequences (tests/stateful/) and the differential tests of verify against the real CDI library and
# containerd (tests/oracle/, SOAK_MINUTES shared by their four releases). Neither verdict depends on
# time or load, so running them together halves the soak and only lowers its counts. Each has its own
# log (meson-logs/soak-*.txt) and neither rebuilds (make built); --verbose prints each tier's counts
# as it ends. Root, like make check's booted tiers.
SOAK_MINUTES ?= 60
soak: build
	tests/debian/fetch-containerd.sh .cache/containerd
	env STATEFUL_MINUTES=$(SOAK_MINUTES) meson test -C $(BUILD) --suite stateful --verbose --no-rebuild \
		--timeout-multiplier 0 --logbase soak-stateful & stateful=$$!; \
	env ORACLE_MINUTES=$$(awk 'BEGIN { print $(SOAK_MINUTES) / 4 }') ORACLE_SEED=random ORACLE_CONFIG_CASES=2000 \
		meson test -C $(BUILD) --suite oracle --verbose --no-rebuild --timeout-multiplier 0 --logbase soak-oracle; \
	oracle=$$?; wait $$stateful; stateful=$$?; \
	echo "soak: oracle exit $$oracle, stateful exit $$stateful"; test $$oracle = 0 && test $$stateful = 0

# A real GPU: lay out a machine root from this host's own driver, build the driver root from it and
# prove it works (tests/gpu/gpu_check.py). Exit 2 without a GPU.
gpu-check: build
	python3 tests/gpu/gpu_check.py $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ARM64) build-release build-plain build-sanitizers
