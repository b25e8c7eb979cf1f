"""What the tests of oneDNN's direct kernels share (``tests/unit/test_onednn_*.py``): they skip where the library is
not installed and run with it switched on whatever the environment says (the ``onednn_on`` fixture,
``tests/conftest.py``). A test module sets ``pytestmark = ONEDNN_TESTS``."""

from __future__ import annotations

import pytest

from plugrt.ops import onednn

ONEDNN_TESTS = [
    pytest.mark.skipif(not onednn.available(), reason="needs oneDNN (pip install 'plugrt[onednn]')"),
    pytest.mark.usefixtures("onednn_on"),
]
