#!/bin/sh
# Installs the Debian packages named on the command line, for `make deps` and tests/cross/setup-arm64.sh.
# A mirror mid-sync makes one index fail to download ("File has unexpected size ... Mirror sync in
# progress?") and `apt-get update` exit 100, although every package needed may be installable: the
# update is tried three times, and a failed one is reported and then left to the install to judge.
# The install's own failure is fatal, and loud.
set -u
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
[ $# -gt 0 ] || exit 0

updated=false
for try in 1 2 3; do
	if $SUDO apt-get update -q; then
		updated=true
		break
	fi
	echo "apt-get update failed (try $try of 3)" >&2
	[ "$try" = 3 ] || sleep 5
done
$updated || echo "apt-get update did not fetch every index; installing from what it has" >&2

if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$@"; then
	echo "Failed to install the Debian packages:$(printf ' %s' "$@")" >&2
	exit 1
fi
