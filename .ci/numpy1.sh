#!/usr/bin/env bash
# The same plugin-facing tests on NumPy 1.x (CI's main run uses the NumPy 2 that pip picks):
# plugin fields, built-in plugins, examples and doc snippets must work on both.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TMPDIR:-/tmp}/plugrt-numpy1"
python -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q "numpy==1.26.4" "onnx==1.16.2" "ml_dtypes==0.4.1"
"$venv/bin/python" -c "import numpy; assert numpy.__version__.startswith('1.'), numpy.__version__"
PYTHONPATH=src "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/compat tests/plugins tests/cpu tests/unit tests/check
