"""What the installed onnxruntime gets right, for tests that use it as an oracle.

onnxruntime 1.23 (the last release for Python 3.10) disagrees with ONNX's specification and
reference evaluator on two cases the tests compare (``Pad`` in ``wrap`` mode wider than the
axis; a bidirectional ``RNN`` with one activation per direction); 1.32, the release the tests
are checked against, agrees. Tests fall back to ONNX's reference evaluator, or skip, with
older releases.
"""

from __future__ import annotations

import onnxruntime

ORT_VERSION = tuple(int(part) for part in onnxruntime.__version__.split(".")[:2])
#: the oldest release known to agree with ONNX on the cases above
ORT_AGREES = (1, 32)
ORT_IS_OLD = ORT_VERSION < ORT_AGREES
