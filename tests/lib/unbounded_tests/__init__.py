"""What the Python test tiers share: the integration harness (fake machine roots, the TAP runner), the
CDI schema check, Debian's real NVIDIA packages unpacked as hosts, the base classes of the CDI and
setup tests, the booted machines of the system tiers, and the man pages' sources as the documentation
checks read them.

Test modules import from this package only, never from one another (tests/unit/test_python_imports.py
holds that; a tier's own helper modules beside its tests, as tests/containerd/pods.py, are not test modules). Meson puts tests/lib on PYTHONPATH for every Python test; a script run by hand does the same:
    PYTHONPATH=tests/lib python3 tests/integration/test_cdi.py
"""

import os

# tests/, the directory holding the data files the helpers read (cdi-schema/, golden/, system/standins/).
TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
