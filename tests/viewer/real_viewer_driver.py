"""Run Proton's real ``proton-viewer`` (triton.profiler.viewer, needs hatchet + pandas) on many argv lists.

Usage: ``$PY real_viewer_driver.py < cases.json > results.json`` where cases.json is a list of argv lists
(without the program name).  For each case the result is ``{"stdout": ..., "exc": [type, message] | None,
"code": exit code}``.  One process runs every case, so pandas/hatchet are imported once.
"""

import contextlib
import io
import json
import sys
import warnings


def main():
    import triton.profiler.viewer as viewer
    cases = json.load(sys.stdin)
    results = []
    for argv in cases:
        out = io.StringIO()
        sys.argv = ["proton-viewer"] + argv
        exc, code = None, 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                    viewer.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException as e:  # noqa: BLE001 - we record what the real viewer raises
                exc, code = [type(e).__name__, str(e)], 1
        results.append({"stdout": out.getvalue(), "exc": exc, "code": code})
    json.dump(results, sys.__stdout__)


if __name__ == "__main__":
    main()
