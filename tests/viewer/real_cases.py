"""The command lines compared against the real proton-viewer (test_against_real_viewer.py).

Inputs: the 7 H200 reference profiles, ``N_RANDOM`` generated profiles (profiles.py) and, for ``N_MSGPACK``
of those, their ``.hatchet_msgpack`` twin (we read the msgpack file, the real viewer the JSON one: it
cannot read msgpack).  For each input: ``--list``, every single metric of a pool (derived and raw, valid
and invalid), and random combinations of 1-3 metrics × frame formats × include/exclude/threshold filters ×
depth × ``--print-sorted``.  Everything is deterministic.
"""

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from . import profiles
from .helpers import REFERENCE_PROFILES, install_reference_profiles

N_RANDOM = 90
N_MSGPACK = 30
RANDOM_COMBOS = 26

METRICS = ["time/ns", "time/us", "time/ms", "time/s", "avg_time/us", "avg_time/ns", "avg_time/s",
           "cpu_time/ns", "cpu_time/ms", "avg_cpu_time/us", "flop/s", "gflop/s", "tflop/s", "flop8/s",
           "gflop16/s", "tflop32/s", "tflop64/s", "flop32/s", "flops32", "flops32/%", "byte/s", "gbyte/s", "tbyte/s", "util",
           "time/%", "count/%", "bytes/%", "cpu_time/%", "flops32/%", "tokens/%", "tile_size/%", "time", "count",
           "bytes", "flops32", "flops16", "flops", "tokens", "cpu_time", "cpu_wait", "tile_size", "ratio",
           "TIME", "Count", "time (ns)", "nope", "time/xx", "Time/ns", "device_id", "name", "vec"]
COMMON = ["time/ns", "time/us", "avg_time/us", "time/%", "count", "time", "bytes", "gbyte/s", "tflop16/s",
          "util", "cpu_time/ns", "tflop32/s", "count/%", "tokens", "tile_size", "bytes", "time/ns", "byte/s"]
FORMATS = ["full", "file_function_line", "function_line", "file_function"]
THRESHOLDS = ["0", "0.5", "10", "100", "900", "2000", "5000", "1e5", "-1", "1e-3", "50"]


@dataclass
class Case:
    """One comparison: our argv (may name a msgpack twin) and the real viewer's argv."""

    ident: str
    ours: list
    real: list = field(default=None)
    group: str = ""  # the input file the case reads

    def __post_init__(self):
        if self.real is None:
            self.real = list(self.ours)


def _names(doc):
    out, stack = [], [doc[0]]
    while stack:
        n = stack.pop()
        out.append(n["frame"]["name"])
        stack.extend(n.get("children", []))
    return sorted(set(out))


def _filters(r, names):
    choice = r.random()
    if choice < 0.45:
        return []
    name = r.choice(names)
    pattern = {0: name, 1: name[: max(1, len(name) // 2)], 2: ".*" + name[-3:]}[r.randrange(3)]
    pattern = pattern.replace("\\", "").replace('"', "").replace("{", "").replace("}", "")
    pattern = "".join(c if c.isalnum() or c in "_/.:@ *<>" else "." for c in pattern)
    if choice < 0.62:
        return ["-i", pattern]
    if choice < 0.8:
        return ["-e", pattern]
    if choice < 0.92:
        return ["-t", r.choice(THRESHOLDS)]
    return [r.choice(["-i", "-e"]), pattern, "-t", r.choice(THRESHOLDS)]


def _combos(r, file_argv, names, ident):
    cases = [Case(f"{ident}-list", ["-l", file_argv])]
    for metric in METRICS:
        cases.append(Case(f"{ident}-m-{metric}", ["-m", metric, file_argv]))
    for k in range(RANDOM_COMBOS):
        n = r.choice([1, 1, 1, 2, 2, 3])
        metrics = ",".join(r.choice(COMMON if r.random() < 0.8 else METRICS) for _ in range(n))
        argv = ["-m", metrics] + _filters(r, names)
        if r.random() < 0.4:
            argv += ["-f", r.choice(FORMATS)]
        if r.random() < 0.3:
            argv += ["-d", str(r.choice([0, 1, 2, 3, 4]))]
        if r.random() < 0.4:
            argv += ["--print-sorted"]
        cases.append(Case(f"{ident}-{k}", argv + [file_argv]))
    return cases


def build_inputs(directory):
    """Write every input file into ``directory``; return [(ident, our file, real file, names)]."""
    directory = Path(directory)
    install_reference_profiles(directory)
    inputs = []
    for name in REFERENCE_PROFILES:
        path = directory / f"{name}.hatchet"
        inputs.append((name, path, path, _names(json.loads(path.read_text()))))
    path = directory / "wide_float.hatchet"
    doc = profiles.wide_float_profile()
    profiles.write_json(doc, path)
    inputs.append(("wide_float", path, path, _names(doc)))
    for seed in range(N_RANDOM):
        doc = profiles.generate(seed)
        path = directory / f"random{seed}.hatchet"
        profiles.write_json(doc, path)
        inputs.append((f"random{seed}", path, path, _names(doc)))
        if seed < N_MSGPACK:
            twin = directory / f"random{seed}.hatchet_msgpack"
            profiles.write_msgpack(doc, twin)
            inputs.append((f"msgpack{seed}", twin, path, _names(doc)))
    return inputs


def build_cases(directory):
    """Return every Case, with absolute file paths in ``directory`` (written by :func:`build_inputs`)."""
    cases = []
    for ident, ours_file, real_file, names in build_inputs(directory):
        r = random.Random(ident)
        for case in _combos(r, "<FILE>", names, ident):
            case.ours = [str(ours_file) if a == "<FILE>" else a for a in case.ours]
            case.real = [str(real_file) if a == "<FILE>" else a for a in case.real]
            case.group = ident
            cases.append(case)
    nested = str(Path(directory) / "nested.hatchet")
    cases += [Case("err-include-exclude", ["-m", "time", "-i", "a", "-e", "b", nested], group="cli"),
              Case("err-no-file", ["-m", "time"], group="cli"),
              Case("err-unknown-option", ["-m", "time", nested, "--bogus"], group="cli"),
              Case("no-metric", [nested], group="cli"),
              Case("empty-metric", ["-m", "", nested], group="cli")]
    return cases


def group_names(cases):
    """The distinct groups of ``cases`` in order."""
    return list(dict.fromkeys(case.group for case in cases))
