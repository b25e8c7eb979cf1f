"""Run ONNX's backend node tests on plugrt and report (or regenerate) the expected-failure list.

    python benchmarks/onnx_node_report.py             # pass count and failures grouped by reason
    python benchmarks/onnx_node_report.py --write     # also rewrite tests/onnx/node_test_expected_failures.txt
    python benchmarks/onnx_node_report.py -k reduce   # only tests whose name matches a regex
    python benchmarks/onnx_node_report.py --backend onnxruntime   # the same harness on onnxruntime

Each test runs as ``onnx.backend.test`` runs it (``prepare``, ``run`` per data set,
``Runner.assert_similar_outputs`` with the case's tolerances); the pytest harness
``tests/onnx/test_onnx_node_suite.py`` runs the same tests through ``BackendTest``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "tests", "onnx", "node_test_expected_failures.txt")


def run_case(case: object, backend_name: str = "plugrt") -> str | None:
    """None when the case passes, else a one-line reason."""
    import numpy as np
    from onnx.backend.test.runner import Runner

    if backend_name == "onnxruntime":
        import onnxruntime.backend as backend
    else:
        import plugrt.onnx.backend as backend

    def tensor(value: object) -> object:
        from onnx import TensorProto, numpy_helper

        return numpy_helper.to_array(value) if isinstance(value, TensorProto) else value

    try:
        rep = backend.prepare(case.model, "CPU")  # type: ignore[attr-defined]
        for inputs, outputs in case.data_sets:  # type: ignore[attr-defined]
            got = rep.run([tensor(i) for i in inputs])
            with np.errstate(all="ignore"):
                Runner.assert_similar_outputs(
                    [tensor(o) for o in outputs],
                    got,
                    rtol=case.rtol,  # type: ignore[attr-defined]
                    atol=case.atol,  # type: ignore[attr-defined]
                )
    except Exception as exc:  # every failure is reported, not raised
        text = " ".join(str(exc).split())
        text = text.removeprefix("the ONNX model could not be imported: ")
        return f"{type(exc).__name__}: {text}"[:160]
    return None


def reason_group(reason: str) -> str:
    """A reason with names and numbers blurred, to group similar failures."""
    text = re.sub(r"'[^']*'", "'…'", reason)
    return re.sub(r"\d+", "N", text)[:110]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"rewrite {os.path.relpath(LIST, ROOT)}")
    parser.add_argument("-k", default="", help="only tests whose name matches this regex")
    parser.add_argument("--backend", choices=("plugrt", "onnxruntime"), default="plugrt", help="backend to run")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from onnx.backend.test.loader import load_model_tests

    start = time.perf_counter()
    cases = [c for c in load_model_tests(kind="node") if re.search(args.k, c.name)]
    loaded = time.perf_counter()
    failures: dict[str, str] = {}
    for case in cases:
        reason = run_case(case, args.backend)
        if reason is not None:
            failures[case.name] = reason
    elapsed = time.perf_counter() - loaded
    groups = collections.Counter(reason_group(r) for r in failures.values())
    for group, count in groups.most_common():
        print(f"{count:5d}  {group}")
    passed = len(cases) - len(failures)
    print(
        f"\n{passed} of {len(cases)} ONNX node tests pass ({len(failures)} fail); "
        f"loading took {loaded - start:.1f} s, running {elapsed:.1f} s"
    )
    if args.write:
        if args.k or args.backend != "plugrt":
            print("--write needs the whole suite on plugrt (drop -k and --backend)", file=sys.stderr)
            return 2
        with open(LIST, "w", encoding="utf-8") as f:
            f.write(
                "# ONNX backend node tests plugrt does not pass yet; tests/onnx/test_onnx_node_suite.py marks them\n"
                "# xfail (non-strict), and any failure of a test not listed here fails the suite.\n"
                "# Regenerate with: python benchmarks/onnx_node_report.py --write\n"
                "# One test name per line (without the _cpu suffix); text after '#' is a comment.\n"
            )
            for name in sorted(failures):
                f.write(f"{name}  # {failures[name]}\n")
        print(f"wrote {len(failures)} names to {os.path.relpath(LIST, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
