"""Metric resolution and derived metrics (``-m``), with the semantics of Proton 3.9's viewer.

A ``-m`` item is matched case-insensitively against the profile's columns, by full name or by the name
without its unit (``time`` matches ``time (ns)``).  A metric listed at ROOT resolves to its subtree sum
``<raw> (inc)``; any other column resolves to its raw per-node values.  Derived metrics add a column:

* ``time/<u>``, ``avg_time/<u>``, ``cpu_time/<u>``, ``avg_cpu_time/<u>`` (``u`` in s, ms, us, ns);
* ``flop/s``, ``gflop/s``, ``tflop/s`` and the width variants ``flop<w>/s`` etc. (w in 8, 16, 32, 64),
  ``byte/s``, ``gbyte/s``, ``tbyte/s``: the metric divided by the time in seconds;
* ``util``: per kernel, max(sum_w flops_w / peak_flops_w, bytes / peak_bandwidth) / time;
* ``<metric>/%``: share of ROOT's value (inclusive metrics) or of the column total (others).

Derived columns are named ``"<metric> (inc)"`` (``util`` and exclusive percentages have no suffix).
One deliberate difference from Proton: a ROOT metric whose name already contains ``(inc)`` resolves to
itself instead of the non-existent ``"<raw> (inc) (inc)"`` (Proton raises ``KeyError``).
"""

import numpy as np

from ..peaks import FLOPS_WIDTHS, max_bps, max_flops

_TIME_FACTORS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
TIME_FAMILIES = {family: {f"{family}/{unit}": f for unit, f in _TIME_FACTORS.items()}
                 for family in ("time", "avg_time", "cpu_time", "avg_cpu_time")}

# derived metric -> (source metric, divisor)
RATE_METRICS = {key: ("bytes", f) for key, f in {"byte/s": 1, "gbyte/s": 1e9, "tbyte/s": 1e12}.items()}
RATE_METRICS.update({key: ("flops", f) for key, f in {"flop/s": 1, "gflop/s": 1e9, "tflop/s": 1e12}.items()})
for _w in FLOPS_WIDTHS:
    RATE_METRICS.update({f"{p}flop{_w}/s": (f"flops{_w}", f) for p, f in (("", 1), ("g", 1e9), ("t", 1e12))})


def metric_label(raw):
    """The name ``--list`` prints for a column: lower case, unit part (from the first ``(``) removed."""
    return raw.split("(")[0].strip().lower()


def match_metric(metric, profile):
    """Resolve one ``-m`` item to a column name (see the module docstring).

    Raises ``RuntimeError("Metric <m> is not found. ...")`` like Proton when nothing matches.
    """
    wanted = metric.lower()
    root = set(profile.root_metrics)
    for raw in profile.root_metrics + profile.other_metrics:
        if wanted in (raw, metric_label(raw)):
            if raw in root and "(inc)" not in raw:
                return raw + " (inc)"
            return raw
    raise RuntimeError(f"Metric {wanted} is not found. Use the --list flag to list available metrics")


def _time_seconds(profile, family, source):
    column = match_metric(source, profile)
    unit = column.split("(")[1].split(")")[0]
    return profile.column(column) * TIME_FAMILIES[family][f"{family}/{unit}"]


def _device_rows(profile, device_index):
    ids = profile.columns["device_id"]
    return np.array([v == device_index for v in ids.tolist()], dtype=bool)


def _min_time_bytes(profile):
    total = np.zeros(len(profile))
    for device_type, devices in profile.device_info.items():
        for index in devices:
            rows = _device_rows(profile, index)
            device = devices[index]
            memory_clock_rate = device["memory_clock_rate"]
            bus_width = device["bus_width"]
            peak = max_bps(device_type, device["arch"], bus_width, memory_clock_rate)
            total[rows] += profile.columns["bytes"][rows] / peak
    return total


def _min_time_flops(profile):
    total = np.zeros(len(profile))
    for device_type, devices in profile.device_info.items():
        for index in devices:
            device = devices[index]
            arch, num_sms, clock_rate = device["arch"], device["num_sms"], device["clock_rate"]
            for width in FLOPS_WIDTHS:
                rows = _device_rows(profile, index)
                column = profile.columns.get(f"flops{width}")
                if column is None:
                    continue
                peak = max_flops(device_type, arch, width, num_sms, clock_rate)
                values = column[rows].astype(np.float64)
                total[rows] += np.where(np.isnan(values), 0.0, values) / peak
    return total


def _utilization(profile):
    by_bytes = _min_time_bytes(profile)
    by_flops = _min_time_flops(profile)
    seconds = _time_seconds(profile, "time", "time")
    internal = np.array([v is None or (isinstance(v, float) and v != v)
                         for v in profile.columns["device_id"].tolist()], dtype=bool)
    best = np.array([b if b > a else a for a, b in zip(by_flops.tolist(), by_bytes.tolist())])
    util = best / seconds
    util = np.asarray(util, dtype=np.float64)
    util[internal] = np.nan
    return util


def _nansum(values):
    if values.dtype.kind == "f":
        return np.where(np.isnan(values), 0.0, values).sum()
    return values.sum()


def _derive_one(profile, metric):
    """Compute one derived metric (adding its column to ``profile``); return the column name."""
    if metric == "util":
        profile.columns["util"] = _utilization(profile)
        return "util"
    if metric in RATE_METRICS:
        source, divisor = RATE_METRICS[metric]
        column = match_metric(source, profile)
        values = profile.column(column)
        profile.columns[f"{metric} (inc)"] = values / _time_seconds(profile, "time", "time") / divisor
        return f"{metric} (inc)"
    for family, factors in TIME_FAMILIES.items():
        if metric in factors:
            source = "cpu_time" if "cpu_time" in family else "time"
            seconds = _time_seconds(profile, family, source)
            if family.startswith("avg_"):
                seconds = seconds / profile.columns["count (inc)"]
            profile.columns[f"{metric} (inc)"] = seconds / factors[family + "/" + metric.split("/")[1]]
            return f"{metric} (inc)"
    parts = metric.split("/")
    if len(parts) > 1:
        if parts[1] != "%":
            raise ValueError(f"Unsupported unit {parts[1]}")
        column = match_metric(parts[0], profile)
        values = profile.column(column)
        if "(inc)" in column:
            name, total = metric + " (inc)", values[0]
        else:
            name, total = metric, _nansum(values)
        profile.columns[name] = (values / total) * 100.0
        return name
    return match_metric(parts[0], profile)


def derive_metrics(profile, metrics):
    """Resolve/derive every ``-m`` item; return the list of column names to display (in order).

    Adds the derived columns to ``profile`` and records them as inclusive or exclusive metrics, exactly as
    Proton does (exclusive ones are rolled up again after each filter, inclusive ones are not).
    """
    names = []
    with np.errstate(all="ignore"):
        for metric in metrics:
            names.append(_derive_one(profile, metric))
    for name in names:
        (profile.inc_metrics if name.endswith("(inc)") else profile.exc_metrics).append(name)
    return names
