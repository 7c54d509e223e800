"""Shared pieces of the benchmarks: paths to the built binaries and the test harness, and timing."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ.setdefault("FIXTURE_DIR", os.path.join(BUILD, "tests", "fixtures"))
os.environ.setdefault("SETUP_BIN", os.path.join(BUILD, "oneshot", "unbounded-nvidia-setup"))
os.environ.setdefault("GENERATOR_BIN", os.path.join(BUILD, "generator", "unbounded-nvidia-generator"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

# Benchmarks run the binaries as systemd would, but without a service manager to talk to.
ENV = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}


def scratch_base():
    """tmpfs when we can write to it: the driver root's file system in production."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def timed(cmd, env=None):
    """Wall time of one child process and its stdout. (Its peak RSS must come from the child itself:
    the rusage of a child of this Python process would include Python's memory from before the exec.)"""
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env or ENV)
    elapsed = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with {p.returncode}")
    return elapsed, p.stdout
