"""Finalize cost of a tree with many kernels (proton_ctypes, mock GPU backend).

Run: ``python bench/finalize.py [--kernels N] [--json PATH]``

20 000 kernels are launched through the mock backend (the same kernel batches a GPU
backend delivers) inside a scope each, as the H200 reference run did for Proton
(0.017 s for ``finalize`` of the tree, 0.19 s for trace data, measured on the H200 with
Proton 3.6.0).  Proton cannot produce kernels on a
CPU, so its figure is the H200 reference.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import results_file
from cpu_common import proton_ctypes_with_mock

proton = proton_ctypes_with_mock()
from proton_ctypes.backends import select  # noqa: E402

PROTON_H200 = {"tree": 0.017, "trace": 0.19}


def one(n, data, tmp):
    mock = select.get("mock")
    proton.start(os.path.join(tmp, f"f_{data}"), backend="mock", data=data)
    for i in range(n):
        with proton.scope("step"):
            mock.launch("add_one", dur_ns=800)
    t = time.perf_counter()
    proton.finalize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    rows = []
    print(f"{'case':34s} {'proton_ctypes s':>15s} {'Proton H200 s':>13s} {'ratio':>6s}")
    for data in ("tree", "trace"):
        ts = [one(a.kernels, data, tmp) for _ in range(a.rounds)]
        med = statistics.median(ts)
        ratio = med / PROTON_H200[data]
        case = f"finalize, {a.kernels} kernels, {data}"
        print(f"{case:34s} {med:15.4f} {PROTON_H200[data]:13.3f} {ratio:6.2f}")
        rows.append({"case": case, "impl": "proton_ctypes", "finalize_s": round(med, 5),
                     "ratio_to_proton": round(ratio, 3)})
        rows.append({"case": case, "impl": "proton", "finalize_s": PROTON_H200[data]})
    if a.json:
        results_file.write(a.json, rows)

if __name__ == "__main__":
    main()
