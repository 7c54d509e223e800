#!/bin/bash
# make demo: assemble a demo machine root from the compiled fixtures and run the real binaries on it.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
export FIXTURE_DIR=$(cd "$build/tests/fixtures" && pwd)
export SETUP_BIN=$(cd "$build/setup" && pwd)/unbounded-nvidia-setup
py=/usr/bin/python3
if [ "$(id -u)" != 0 ]; then
	# Fake device nodes need mknod (root). Without it, bind /dev/null over plain files in a private
	# user+mount namespace: they are then real character devices for the programs run inside it.
	echo "note: not root, so the demo fakes /dev/nvidia* by bind-mounting /dev/null in a private namespace"
	exec unshare -r -m "$py" "$here/demo.py"
fi
exec "$py" "$here/demo.py"
