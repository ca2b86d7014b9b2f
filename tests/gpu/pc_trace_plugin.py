"""Diagnostic pytest plugin (GPU): what proton_ctypes's PC sampler does, launch by launch.

Proton's own ``test_pcsampling`` fails in its suite on the H200 under proton_ctypes (the torch
fill kernel gets no sample) while the same body run alone gets samples. This plugin writes,
for every test, each sampling range: when it started and stopped, the launched kernel's name,
and the samples of each function the range collected, so a run of the suite shows where the
fill kernels' samples went (another range, or none at all).

Use: ``PROTON_CTYPES_PC_TRACE=/path/trace.jsonl PYTEST_PLUGINS=pc_trace_plugin`` with
``tests/gpu`` on ``PYTHONPATH`` (``pytest`` and ``tests/upstream/run.py`` pass both on). It
changes nothing when the variable is unset. Each line is one JSON object: ``{"test": id}`` at a
test's start (with ``impl``, the profiler ``tests/upstream/run.py`` runs), ``{"range": ...}``
per range.
"""
import json
import os
import time

TRACE_ENV = "PROTON_CTYPES_PC_TRACE"
_out = []
_open = {}


def _write(obj) -> None:
    if _out:
        _out[0].write(json.dumps(obj) + "\n")
        _out[0].flush()


def pytest_configure(config):
    path = os.environ.get(TRACE_ENV)
    if not path or _out:
        return
    from proton_ctypes.backends.nvidia import pcsampling

    _out.append(open(path, "a"))
    sampler = pcsampling.PCSampler
    start, stop, on_callback = sampler.start, sampler.stop, sampler.on_callback

    def traced_start(self, ctx):
        was = self.started
        t0 = time.perf_counter_ns()
        start(self, ctx)
        if not was and self.started:
            _open[id(self)] = {"ctx": ctx, "start_ns": t0, "started_ns": time.perf_counter_ns()}

    def traced_stop(self, ctx):
        groups = stop(self, ctx)
        rng = _open.pop(id(self), {"ctx": ctx})
        rng["stop_ns"] = time.perf_counter_ns()
        samples = {}
        for (function, _frame), values in groups.items():
            samples[function] = samples.get(function, 0) + int(values[0])
        rng["samples"] = samples
        self._trace_range = rng
        return groups

    def traced_on_callback(self, domain, cbid, data):
        if not getattr(self, "_trace_wrapped", False):      # the launched kernel's name, per range
            inner = self.on_samples

            def on_samples(groups, symbol):
                self._trace_symbol = symbol
                return inner(groups, symbol)
            self.on_samples, self._trace_wrapped = on_samples, True
        on_callback(self, domain, cbid, data)
        rng = getattr(self, "_trace_range", None)
        if rng is not None:
            self._trace_range = None
            rng["kernel"] = getattr(self, "_trace_symbol", None)
            rng["errors"] = len(self.errors)
            rng["error_texts"] = [repr(e)[:200] for e in self.errors[:3]]
            rng["contexts"] = [hex(c) for c in self.contexts]
            _write({"range": rng})

    sampler.start, sampler.stop, sampler.on_callback = traced_start, traced_stop, traced_on_callback


def pytest_runtest_setup(item):
    _write({"test": item.nodeid, "impl": os.environ.get("PROTON_UPSTREAM_IMPL")})
