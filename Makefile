# Two entry points for people and CI; both install what a fresh Debian bookworm machine lacks.
#   make demo    build, assemble a demo machine root, run setup on it, show the result
#   make check   build and run every test tier (unit, integration, system)
#   make check-arm64   cross-build for arm64 and run the unit and integration tiers under qemu-user
BUILD ?= build
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Build and test dependencies, all from Debian bookworm main.
BUILD_DEPS := meson ninja-build g++ pkg-config libsystemd-dev libmount-dev nlohmann-json3-dev \
	libyaml-cpp-dev catch2 systemd scdoc
TEST_DEPS := python3 python3-jsonschema python3-yaml util-linux
# The system tier boots a mkosi image with systemd-nspawn.
SYSTEM_DEPS := systemd-container mkosi debootstrap
PACKAGE_DEPS := debhelper dpkg-dev fakeroot lintian man-db groff-base git
# The fleet tests check the metrics files with promtool and scrape them with node_exporter.
FLEET_DEPS := prometheus prometheus-node-exporter

.PHONY: all deps demo check check-arm64 build clean

all: build

deps:
	@missing=""; for p in $(BUILD_DEPS) $(TEST_DEPS) $(EXTRA_DEPS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

demo: build
	tests/demo.sh $(BUILD)

check: EXTRA_DEPS = $(SYSTEM_DEPS) $(PACKAGE_DEPS) $(FLEET_DEPS)
check: build
	tests/debian/fetch-nvidia-debs.sh $(BUILD)/nvidia-debs
	meson test -C $(BUILD) --print-errorlogs

# arm64 (GB300 hosts): Debian's cross g++ and :arm64 libraries, qemu-user-static as the exe wrapper
# (no binfmt_misc), in its own build directory. tests/cross/setup-arm64.sh installs what is missing.
BUILD_ARM64 ?= build-arm64
check-arm64: deps
	tests/cross/setup-arm64.sh $(BUILD_ARM64)
	meson compile -C $(BUILD_ARM64)
	meson test -C $(BUILD_ARM64) --suite unit --suite integration --print-errorlogs

clean:
	rm -rf $(BUILD) $(BUILD_ARM64)
