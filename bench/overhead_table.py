"""``bench/overhead.py``'s results table: medians over rounds, overheads, ratios to Proton."""
from __future__ import annotations

import statistics
import sys

from overhead_cases import BASIC_CASES, CASES, FINALIZE_CASES, HOOK_CASE, IMPLS
from overhead_diagnostics import DIAGNOSTIC_IMPLS, FLOOR_IMPLS, HOOK_DIAGNOSTIC_IMPLS


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _pooled(collected, impl, case):
    """Median of every (profiled - own bare) pair of ``impl`` in ``case`` over all rounds."""
    pairs = [x for r in collected.get(impl, []) for x in r.get(case, {}).get("self_pairs_us", [])]
    return round(statistics.median(pairs), 3) if pairs else None


def summarize(collected):
    """Rows of the results table (medians over rounds)."""
    def med(impl, case, key):
        return _median([r.get(case, {}).get(key) for r in collected.get(impl, [])])

    rows = []
    for case in CASES:
        bare = med("bare", case, "us")
        proton_over = None
        for impl in IMPLS + DIAGNOSTIC_IMPLS:
            if impl in HOOK_DIAGNOSTIC_IMPLS:
                if case != HOOK_CASE:
                    continue
            elif impl in ("torch.profiler",) + DIAGNOSTIC_IMPLS and case not in BASIC_CASES:
                continue
            us = med(impl, case, "us")
            if us is None:
                continue
            cross = None if bare is None or impl == "bare" else us - bare
            own = _pooled(collected, impl, case)
            over = own if own is not None else cross
            if impl == "proton":
                proton_over = over
            row = {"case": case, "impl": impl, "us_per_op": round(us, 3),
                   "overhead_us": None if over is None else round(over, 3), "ratio_to_proton": None,
                   "finalize_s": None,
                   "overhead_cross_process_us": None if cross is None else round(cross, 3),
                   "rounds_us": [round(r[case]["us"], 3) for r in collected[impl]
                                             if case in r and r[case]["us"] is not None],
                   "reps_us": [r[case].get("us_reps") for r in collected[impl] if case in r]}
            if impl in FLOOR_IMPLS:   # a floor: a bare loop under CUPTI alone, as in bench/models.py
                row["impl"], row["floor"] = "bare", impl.split(":", 1)[1]
            elif impl not in ("bare", "torch.profiler"):
                row["kernels_recorded"] = [r[case].get("kernels") for r in collected[impl] if case in r]
                row["kernels_expected"] = next((r[case].get("expected_kernels") for r in collected[impl]
                                                if case in r), None)
            rows.append(row)
        for row in rows:
            if row["case"] == case and row["overhead_us"] is not None and proton_over:
                row["ratio_to_proton"] = round(row["overhead_us"] / proton_over, 3)
    for fcase, source in FINALIZE_CASES.items():
        proton_f = med("proton", source, "finalize_s")
        for impl in ("proton", "proton_ctypes", "torch.profiler") + DIAGNOSTIC_IMPLS:
            if impl in FLOOR_IMPLS:
                continue
            f = med(impl, source, "finalize_s")
            if f is None:
                continue
            rows.append({"case": fcase, "impl": impl, "us_per_op": None, "overhead_us": None,
                         "ratio_to_proton": round(f / proton_f, 3) if proton_f else None,
                         "finalize_s": round(f, 5)})
    return rows


def print_table(rows, out=sys.stdout):
    """The printed table: µs per op, overhead over bare, ratio to Proton, finalize seconds."""
    head = (f"{'case':30s} {'impl':20s} {'us/op':>8s} {'overhead':>9s} {'vs Proton':>9s} {'x-process':>9s} "
            f"{'finalize s':>10s}")
    print(head, file=out)
    print("-" * len(head), file=out)

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"
    for r in rows:
        label = r["impl"] + (f" {r['floor']} floor" if "floor" in r else "")
        print(f"{r['case'][:30]:30s} {label:20s} {fmt(r['us_per_op'], '8.2f'):>8s} "
              f"{fmt(r['overhead_us'], '+9.2f'):>9s} {fmt(r['ratio_to_proton'], '9.2f'):>9s} "
              f"{fmt(r.get('overhead_cross_process_us'), '+9.2f'):>9s} "
              f"{fmt(r['finalize_s'], '10.4f'):>10s}", file=out)
