"""The CUPTI backend on a real GPU: loading, stride, join, clocks, threads, streams, graphs,
python context, periodic flushing, another CUPTI user.  Skipped without a CUDA GPU."""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from proton_ctypes.backends.nvidia import layout as cupti_layout  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.tree import strings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.environ.get("PROTON_CTYPES_GPU_REPORT")


@triton.jit
def tiny(x_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)


X = torch.zeros(1024, device="cuda")
tiny[(1,)](X, 1024, BLOCK=1024)
torch.cuda.synchronize()


class Sink:
    def __init__(self):
        self.batches, self.lock = [], threading.Lock()

    def __call__(self, batch):
        with self.lock:
            self.batches.append(batch.copy())

    def rows(self):
        return np.concatenate(self.batches) if self.batches else np.zeros(0)


def _report(name, backend, **extra):
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(json.dumps({"test": name, **backend.stats, **extra}, default=str) + "\n")


def _run(mode="", python_context=None, body=None):
    backend, sink = CuptiBackend(), Sink()
    backend.start(sink, select.parse_mode("cupti", mode), python_context=python_context)
    try:
        extra = body() if body else {}
    finally:
        backend.stop()
    return backend, sink.rows(), extra or {}


@pytest.mark.parametrize("source", ["position", "kernel", "api"])
def test_triton_and_torch_launches_join_to_thread_and_launch_time(source, monkeypatch):
    """Every launch source puts every launch on its thread; the kernel record's queued time and the
    fallback's launch-API records put it inside its Python window; launch positions (the default,
    no edge here) after the thread's buffer request, in launch order."""
    if source != "position":
        monkeypatch.setenv("PROTON_CTYPES_LAUNCH_SOURCE", source)
    windows = []

    def body():
        for i in range(200):
            before = time.time_ns()
            if i % 2:
                tiny[(1,)](X, 1024, BLOCK=1024)
            else:
                X.add_(1)
            windows.append((before, time.time_ns()))
        torch.cuda.synchronize()
    backend, rows, _ = _run(body=body)
    _report(f"join ({source})", backend)
    assert backend.launch_source == source
    stats = backend.stats
    if source == "api":
        assert stats["join_api_matched"] == 200
    else:
        assert stats["join_owner_matched"] == 200 and stats["join_api_records"] == 0
    assert len(rows) == 200
    assert backend.stride_source == "walk"
    assert backend.kernel_stride == cupti_layout.expected_kernel_stride(backend.lib.version)
    assert np.all(rows["tid"] == threading.get_native_id())
    order = np.argsort(rows["launch_ns"])
    lo, hi = np.array(windows).T
    if source == "position":
        assert np.all(np.diff(rows["corr"][order].astype(np.int64)) > 0)
        assert np.all(rows["launch_ns"] <= hi[-1])
        return
    assert np.all((rows["launch_ns"][order] >= lo) & (rows["launch_ns"][order] <= hi))
    assert np.all(rows["end_ns"] > rows["start_ns"]) and np.all(rows["start_ns"] > rows["launch_ns"])
    assert backend.dropped == 0 and backend.stats["join_api_missing"] == 0
    assert {strings.name_of(i) for i in np.unique(rows["name_id"])} >= {"tiny"}


def test_cupti_clock_is_time_time_ns():
    backend, _, _ = _run()
    _report("clock", backend)
    assert backend.attribution == "timestamp" and abs(backend.clock_offset_ns) < 50_000


def test_threads_and_streams_keep_their_ids():
    seen = {}

    def worker(i):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(50):
                tiny[(1,)](X, 1024, BLOCK=1024)
        stream.synchronize()
        seen[threading.get_native_id()] = stream

    def body():
        workers = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    backend, rows, _ = _run(body=body)
    _report("threads", backend)
    assert len(rows) == 150
    for tid in seen:
        mine = rows[rows["tid"] == tid]
        assert len(mine) == 50 and len(np.unique(mine["stream"])) == 1
    assert len(np.unique(rows["stream"])) == 3


def test_graph_replays_carry_capture_thread_and_time():
    y = torch.zeros(1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tiny[(1,)](y, 1024, BLOCK=1024)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    window = {}

    def body():
        g = torch.cuda.CUDAGraph()
        window["before"] = time.time_ns()
        with torch.cuda.graph(g):
            tiny[(1,)](y, 1024, BLOCK=1024)
            y.add_(1)
            tiny[(1,)](y, 1024, BLOCK=1024)
        window["after"] = time.time_ns()
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
    backend, rows, _ = _run(body=body)
    replayed = rows[rows["cap_tid"] >= 0]
    _report("graph", backend, replayed=len(replayed), rows=len(rows))
    assert len(replayed) == 15
    assert np.all(replayed["cap_tid"] == threading.get_native_id())
    assert np.all((replayed["cap_ns"] >= window["before"]) & (replayed["cap_ns"] <= window["after"]))
    assert np.all(replayed["tid"] == threading.get_native_id())


def test_python_context_assigns_a_node_to_every_launch():
    counter = iter(range(1000, 10**9))

    def context():
        return next(counter)

    def body():
        for _ in range(20):
            tiny[(1,)](X, 1024, BLOCK=1024)
            X.add_(1)
        torch.cuda.synchronize()
    backend, rows, _ = _run(python_context=context, body=body)
    _report("python_context", backend)
    assert len(rows) == 40
    assert np.all(rows["py_node"] >= 1000), backend.stats
    assert len(np.unique(rows["py_node"])) == 40


def test_periodic_flushing_delivers_without_flush_calls():
    backend, sink = CuptiBackend(flush_interval_s=0.05), Sink()
    backend.start(sink, select.parse_mode("cupti", "periodic_flushing"))
    try:
        for _ in range(30):
            tiny[(1,)](X, 1024, BLOCK=1024)
        torch.cuda.synchronize()
        deadline = time.monotonic() + 5
        while len(sink.rows()) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(sink.rows()) == 30
    finally:
        backend.stop()


def test_device_info_matches_protons_block():
    info = CuptiBackend().device_info([0])["CUDA"]["0"]
    major, minor = torch.cuda.get_device_capability(0)
    assert info["arch"] == f"{major}{minor}"
    assert info["num_sms"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert set(info) == {"arch", "bus_width", "clock_rate", "memory_clock_rate", "num_sms"}


def test_torch_profiler_in_the_same_process_is_a_clear_error():
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        import torch
        from proton_ctypes.backends.cupti import CuptiBackend
        x = torch.zeros(4, device="cuda"); x.add_(1); torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            x.add_(1)
            try:
                CuptiBackend().start(lambda b: None)
                print("STARTED")
            except RuntimeError as e:
                print("ERROR", e)
        print("ALIVE")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ALIVE" in out.stdout
    assert "ERROR" in out.stdout and "torch.profiler" in out.stdout, out.stdout
