"""Shared pieces of the benchmarks: paths to the built binaries and the test harness, and timing."""

import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ.setdefault("FIXTURE_DIR", os.path.join(BUILD, "tests", "fixtures"))
os.environ.setdefault("SETUP_BIN", os.path.join(BUILD, "setup", "unbounded-nvidia-setup"))
os.environ.setdefault("GENERATOR_BIN", os.path.join(BUILD, "generator", "unbounded-nvidia-generator"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))

# Benchmarks run the binaries as systemd would, but without a service manager to talk to.
ENV = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}


def scratch_base():
    """tmpfs when we can write to it: the driver root's file system in production."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def timed(cmd, env=None):
    """Wall time of one child process and its stdout, spawned with posix_spawn (no pipes, no threads:
    the harness adds as little as it can to what it measures). The child's peak RSS must come from the
    child itself: a child's rusage would include this Python process's memory from before the exec."""
    with tempfile.TemporaryFile() as out:
        actions = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
        t = time.perf_counter()
        pid = os.posix_spawn(shutil.which(cmd[0]) or cmd[0], cmd, env or ENV, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        elapsed = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(cmd)} failed with {os.waitstatus_to_exitcode(status)}")
        out.seek(0)
        return elapsed, out.read()
