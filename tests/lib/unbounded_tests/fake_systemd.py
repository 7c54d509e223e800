"""The tests' PID 1 for a fake root: tests/fixtures/fake_systemd.cpp listening on the root's
run/systemd/private, where the programs' real sd-bus client finds a --root tree's service manager.
Its units are a JSON file the test writes and reads back (the fixture's header says how)."""

import os
import subprocess
import time

from .harness import fixture


class FakeSystemd:
    def __init__(self, root, units_file):
        self.socket = os.path.join(root, "run/systemd/private")
        self.units_file = units_file
        self.process = None

    def start(self):
        """Listens on the root's socket (once), returning when a client can connect."""
        if self.process and self.process.poll() is None:
            return self
        os.makedirs(os.path.dirname(self.socket), exist_ok=True)
        if not os.path.exists(self.units_file):
            with open(self.units_file, "w") as f:
                f.write('{"units": {}, "calls": []}\n')
        self.process = subprocess.Popen([fixture("fake-systemd"), self.units_file, self.socket], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fake-systemd did not listen on {self.socket} (exit status {self.process.poll()})")
            time.sleep(0.01)
        return self

    def stop(self):
        """Stops listening and removes the socket: the tree has no service manager again."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
        if os.path.lexists(self.socket):
            os.unlink(self.socket)
