"""Metric resolution and derived metrics on a hatchet GraphFrame (the Python API of Proton 3.9's viewer).

The same rules as the command (:mod:`.metrics`), on ``gf.dataframe`` instead of a :class:`~.tree.Profile`:
``inclusive_metrics`` are the metrics listed at ROOT (hatchet's ``show_metric_columns()``) and
``exclusive_metrics`` every other dataframe column.  A requested name resolves, case-insensitively, to a
column by full name or by name without unit; an inclusive metric resolves to its subtree sum
``"<raw> (inc)"``.  Derived columns are added to ``gf.dataframe`` and their names are appended to
``gf.inc_metrics`` (names ending in ``(inc)``) or ``gf.exc_metrics``, as Proton does.

One deliberate difference (README, "Differences from Proton"): a ROOT metric already named ``x (inc)`` resolves to itself; Proton
returns ``"x (inc) (inc)"``, a column that does not exist (``KeyError`` as soon as it is used).
"""

import numpy as np

from .frame_deps import pd
from .metrics import RATE_METRICS, TIME_FAMILIES, metric_label
from ..peaks import FLOPS_WIDTHS, max_bps, max_flops

__all__ = ["derive_metrics", "get_min_time_bytes", "get_min_time_flops", "match_available_metrics"]


def match_available_metrics(metrics, inclusive_metrics, exclusive_metrics):
    """Resolve each name of ``metrics`` (a list or one string) to a column; return the list of columns.

    Names that match nothing are left out; when none matches, ``RuntimeError("Metric <m> is not found. Use
    the --list flag to list available metrics")`` names the last one (lower case).
    """
    wanted = metrics if isinstance(metrics, list) else [metrics]
    columns, last = [], ""
    for metric in wanted:
        last = metric.lower()
        for raw in list(inclusive_metrics) + list(exclusive_metrics):
            if last in (raw, metric_label(raw)):
                rolled_up = raw in inclusive_metrics and "(inc)" not in raw
                columns.append(raw + " (inc)" if rolled_up else raw)
                break
    if not columns:
        raise RuntimeError(f"Metric {last} is not found. Use the --list flag to list available metrics")
    return columns


def _devices(device_info):
    """Yield ``(device_type, device_index, device_dict)`` in the order of the device-info block."""
    for device_type, devices in device_info.items():
        for index, device in devices.items():
            yield device_type, index, device


def get_min_time_flops(df, device_info):
    """Seconds each row's ``flops<w>`` would take at the peak FLOP/s of its device (summed over widths).

    Returns a DataFrame with one float column ``min_time`` on ``df``'s index (0 for rows of no device).
    """
    out = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    for device_type, index, device in _devices(device_info):
        arch, num_sms, clock_rate = device["arch"], device["num_sms"], device["clock_rate"]
        for width in FLOPS_WIDTHS:
            rows = df["device_id"] == index
            column = f"flops{width}"
            if column not in df.columns:
                continue
            peak = max_flops(device_type, arch, width, num_sms, clock_rate)
            out.loc[rows, "min_time"] += df.loc[rows, column].fillna(0) / peak
    return out


def get_min_time_bytes(df, device_info):
    """Seconds each row's ``bytes`` would take at the peak memory bandwidth of its device.

    Returns a DataFrame with one float column ``min_time`` (``nan`` where a device row has no ``bytes``).
    """
    out = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    for device_type, index, device in _devices(device_info):
        rows = df["device_id"] == index
        memory_clock_rate, bus_width = device["memory_clock_rate"], device["bus_width"]  # kHz, bits
        peak = max_bps(device_type, device["arch"], bus_width, memory_clock_rate)
        out.loc[rows, "min_time"] += df.loc[rows, "bytes"] / peak
    return out


class _Deriver:
    """Computes one requested metric at a time on ``gf.dataframe``; each method returns the column name."""

    def __init__(self, gf, inclusive_metrics, exclusive_metrics, device_info):
        self.gf = gf
        self.inclusive = inclusive_metrics
        self.exclusive = exclusive_metrics
        self.device_info = device_info

    def resolve(self, name):
        return match_available_metrics(name, self.inclusive, self.exclusive)[0]

    def seconds(self, family, source):
        """The time column ``source`` resolves to, converted to seconds from the unit in its name."""
        column = self.resolve(source)
        unit = column.split("(")[1].split(")")[0]
        return self.gf.dataframe[column] * TIME_FAMILIES[family][f"{family}/{unit}"]

    def utilization(self):
        df = self.gf.dataframe
        by_bytes = get_min_time_bytes(df, self.device_info)["min_time"]
        by_flops = get_min_time_flops(df, self.device_info)["min_time"]
        seconds = self.seconds("time", "time")
        no_device = df["device_id"].isna()
        # the larger of the two bounds; where the bytes bound is not larger (or either is nan), the flops one
        best = pd.Series(np.where(by_bytes > by_flops, by_bytes, by_flops), index=df.index)
        df["util"] = best / seconds
        df.loc[no_device, "util"] = np.nan
        return "util"

    def rate(self, metric):
        source, divisor = RATE_METRICS[metric]
        column = self.resolve(source)
        df = self.gf.dataframe
        df[f"{metric} (inc)"] = df[column] / self.seconds("time", "time") / divisor
        return f"{metric} (inc)"

    def time(self, metric, family):
        seconds = self.seconds(family, "cpu_time" if "cpu_time" in family else "time")
        if family.startswith("avg_"):
            seconds = seconds / self.gf.dataframe["count (inc)"]
        self.gf.dataframe[f"{metric} (inc)"] = seconds / TIME_FAMILIES[family][metric]
        return f"{metric} (inc)"

    def other(self, metric):
        base, *unit = metric.split("/")
        if not unit:
            return self.resolve(base)
        if unit[0] != "%":
            raise ValueError(f"Unsupported unit {unit[0]}")
        column = self.resolve(base)
        values = self.gf.dataframe[column]
        if "(inc)" in column:  # share of ROOT's (first row's) value
            name, total = metric + " (inc)", values.iloc[0]
        else:  # share of the column total
            name, total = metric, values.sum()
        self.gf.dataframe[name] = (values / total) * 100.0
        return name

    def derive(self, metric):
        if metric == "util":
            return self.utilization()
        if metric in RATE_METRICS:
            return self.rate(metric)
        for family, factors in TIME_FAMILIES.items():
            if metric in factors:
                return self.time(metric, family)
        return self.other(metric)


def derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info):
    """Resolve or derive every name of ``metrics`` on ``gf`` (in place); return the column names, in order.

    Derived metrics: ``time/<u>``, ``avg_time/<u>``, ``cpu_time/<u>``, ``avg_cpu_time/<u>`` (u in s, ms, us,
    ns), ``[g|t]flop[8|16|32|64]/s``, ``[g|t]byte/s``, ``util`` (exclusive) and ``<metric>/%``; any other
    name is a raw metric.  Each name is then recorded in ``gf.inc_metrics`` or ``gf.exc_metrics``.
    """
    deriver = _Deriver(gf, inclusive_metrics, exclusive_metrics, device_info)
    names = [deriver.derive(metric) for metric in metrics]
    for name in names:
        (gf.inc_metrics if name.endswith("(inc)") else gf.exc_metrics).append(name)
    return names
