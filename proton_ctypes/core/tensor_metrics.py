"""Device-tensor metrics: captured on the device, never synchronising at scope entry/exit.

A metric whose value is a GPU tensor (a loss, a token count) is recorded by one small
Triton kernel of ours, launched on the current stream: it reserves ``numel + 1`` slots
of a device ring buffer with an atomic add and writes ``{seq_id, values...}`` (doubles
as their bit pattern).  Concurrent streams and CUDA-graph replays append safely; a graph
replay writes the same ``seq_id`` again, so each replay adds its values.  At flush the
ring is read back in one copy and each record is added to the node its ``seq_id`` was
registered for.

Types are checked when the metric is given (from the tensor's dtype and size, as
Proton does): a zero of the right type is added right away, the value at flush.
"""
from __future__ import annotations

import itertools
import os
import threading

import numpy as np

from ..backends.nvidia import driver as cuda_driver
from . import general_path
from . import graph_metrics
from ..backends.nvidia.driver import CudaError
from .registry import G
from .metric_launch import DirectLauncher
from . import graph_metric_kernel
from .optional import require
from ..tree import metrics as tmetrics

_seq = itertools.count(1)
#: seq id -> (is_float, numel, [(session id, phase, node, raw key)], tensor kept alive, persistent).
#: Only a metric captured with a CUDA graph keeps its tensor (every replay reads it); an eager
#: one holds none, as libproton holds only the pointer: its kernel is queued on the current
#: stream before the tensor can be freed, and the caching allocator reuses memory in stream
#: order, so thousands of steps between flushes do not keep thousands of tensors alive
registry: dict = {}
_rings: dict = {}
_lock = threading.Lock()
_kernel = None
#: records lost because the ring wrapped before a flush
dropped = 0


def _ring_slots() -> int:
    try:
        size = int(os.environ.get("TRITON_PROFILE_METRIC_BUFFER_SIZE", str(64 << 20)))
    except ValueError:
        size = 64 << 20
    return max(16, size // 8)


def get_kernel():
    """The Triton kernel writing one metric record (compiled on first use)."""
    global _kernel
    if _kernel is None:
        require("a device-tensor metric", "triton", "triton")
        import triton  # lazy: triton is optional
        import triton.language as tl  # lazy: triton is optional

        @triton.jit(do_not_specialize=["ring_ptr", "offset_ptr", "size", "seq_id", "value_ptr", "n"])
        def write_metric_record(ring_ptr, offset_ptr, size, seq_id, value_ptr, n,
                                IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
            # reserve n + 1 slots atomically, then write seq_id and the values (wrapping)
            pos = tl.atomic_add(offset_ptr, n + 1, sem="relaxed")
            tl.store(ring_ptr + pos % size, seq_id)
            for start in range(0, n, BLOCK):
                idx = start + tl.arange(0, BLOCK)
                m = idx < n
                v = tl.load(value_ptr + idx, mask=m)
                # the tensor's own dtype: convert here (Proton launches a cast kernel first)
                if IS_FLOAT:
                    v = v.to(tl.float64).to(tl.int64, bitcast=True)
                else:
                    v = v.to(tl.int64)
                tl.store(ring_ptr + (pos + 1 + idx) % size, v, mask=m)

        _kernel = write_metric_record
    return _kernel


class Ring:
    """The device ring buffer of one device and the host's read position in it."""

    def __init__(self, device):
        import torch  # lazy: torch is optional
        self.size = _ring_slots()
        self.buf = torch.zeros(self.size, dtype=torch.int64, device=device)
        self.offset = torch.zeros(1, dtype=torch.int64, device=device)
        self.read = 0

    def take(self):
        """Copy out the slots written since the last take: an int64 numpy array (syncs)."""
        global dropped
        total = int(self.offset.item())
        n = total - self.read
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        if n > self.size:
            dropped += n - self.size
            self.read = total - self.size
            n = self.size
        # copy only the slots written since the last take (one or two slices of the ring)
        lo, hi = self.read % self.size, total % self.size
        self.read = total
        if lo < hi:
            return self.buf[lo:hi].cpu().numpy()
        head = self.buf[lo:].cpu().numpy()
        return np.concatenate([head, self.buf[:hi].cpu().numpy()]) if hi else head


def ensure_kernels() -> None:
    """Compile the metric kernel ahead of the first device-tensor metric."""
    get_kernel()


def _ring_for(device):
    key = device
    r = _rings.get(key)
    if r is None:
        with _lock:
            r = _rings.get(key)
            if r is None:
                r = _rings[key] = Ring(device)
    return r


#: (value dtype, is_float) -> compiled kernel, launched directly (no JIT dispatch per metric)
_compiled: dict = {}
#: launch the compiled kernel through Triton's launcher (``run``) rather than ``kernel[grid]``
_triton_run_ok = [True]
#: name of our kernel, which the launch hook ignores
KERNEL_NAME = "write_metric_record"


def _compiled_for(ring, value, is_float):
    key = (value.dtype, is_float)
    ck = _compiled.get(key)
    if ck is None:
        kernel = get_kernel()
        try:
            ck = kernel.warmup(ring.buf, ring.offset, ring.size, 1, value, 1, IS_FLOAT=is_float, BLOCK=128,
                               grid=(1,), num_warps=1)
            ck._init_handles()
        except Exception:
            ck = False  # this triton cannot hand out compiled kernels: use the JIT path
        _compiled[key] = ck
    return ck


def _raw_stream(device):
    """The raw handle of the current CUDA stream of ``device``; None off CUDA."""
    if device.type != "cuda":
        return None
    import torch  # lazy: torch is optional
    try:
        return torch._C._cuda_getCurrentRawStream(device.index if device.index is not None
                                                   else torch.cuda.current_device())
    except (AttributeError, RuntimeError):
        return None


#: (compiled kernel, ring) -> its DirectLauncher, or False when Triton's launcher must do it
_launchers: dict = {}


def _direct_for(ck, ring):
    key = (ck, ring)
    d = _launchers.get(key)
    if d is None:
        d = _launchers[key] = DirectLauncher.create(cuda_driver.driver(), ck, ring.buf.data_ptr(),
                                                    ring.offset.data_ptr(), ring.size) or False
    return d


def _launch(ring, seq, tm, is_float, stream):
    value = tm.value
    ck = _compiled.get((value.dtype, is_float))
    if ck is None:
        ck = _compiled_for(ring, value.reshape(-1), is_float)
    if ck:
        direct = _direct_for(ck, ring) if stream is not None else False
        if direct:
            try:
                # one cuLaunchKernel, as Proton launches its metric kernels from C++ (and, like
                # those, never through Triton's launch hooks); a 0-d tensor needs no reshape
                direct.launch(stream, seq, tm.ptr, tm.numel)
                return
            except CudaError:
                _launchers[(ck, ring)] = False  # e.g. no current context on this thread
    if value.dim() != 1:
        value = value.reshape(-1)
    if ck:
        args = (ring.buf, ring.offset, ring.size, seq, value, tm.numel, is_float, 128)
        if _triton_run_ok[0] and stream is not None:
            try:
                # straight into Triton's launcher: no stream lookup, no launch hooks
                ck.run(1, 1, 1, stream, ck.function, ck.packed_metadata, None, None, None, *args)
                return
            except (TypeError, AttributeError):
                _triton_run_ok[0] = False
        try:
            # triton's launcher takes every argument of the signature, constexprs included
            ck[(1, 1, 1)](*args)
            return
        except TypeError:
            _compiled[(value.dtype, is_float)] = False  # another launcher convention: the JIT path
    get_kernel()[(1,)](ring.buf, ring.offset, ring.size, seq, value, tm.numel, IS_FLOAT=is_float,
                       BLOCK=128, num_warps=1)


def _capturing(stream) -> bool:
    """Whether the current stream (``stream``, raw, or None off the GPU) is being captured."""
    drv = cuda_driver.driver() if stream is not None else None
    if drv is not None:
        try:
            return drv.is_capturing(stream)
        except CudaError:
            pass
    try:
        import torch  # lazy: torch is optional
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def capture_graph(device):
    """The CUgraph the current stream of ``device`` is being captured into, else None."""
    cap = graph_metric_kernel.current_capture(device)
    return None if cap is None else cap[0]


def add_tensor_metrics(ctx, sid, targets, tensor: dict) -> None:
    """Type-check now, launch one record kernel per metric, and remember where it goes.

    Inside a CUDA-graph capture the metrics go to the graph's book instead
    (:mod:`.graph_metrics`): nothing is added now, each replay adds its values.
    """
    pairs = general_path.session_targets(targets)
    if not pairs:
        return
    device = next(iter(tensor.values())).value.device
    graph = capture_graph(device) if G.capturing else None
    if graph is not None:
        graph_metric_kernel.capture_tensor_metrics(graph, pairs, tensor, graph_metric_kernel.launch_triton)
        return
    if graph_metrics.connected:
        graph_metric_kernel.reserve(device)   # memory a later capture's metrics will need
    for key in sorted(tensor):
        tm = tensor[key]
        vt = tm.metric_type_index   # libproton's numbering is the tree's value type
        is_float = vt in (tmetrics.DOUBLE, tmetrics.VDOUBLE)
        vector = vt >= tmetrics.VINT
        stored, pty = tmetrics.parse_key(key)
        zero = ([0.0] * tm.numel if is_float else [0] * tm.numel) if vector else (0.0 if is_float else 0)
        for s, node in pairs:
            tmetrics.add_value(s.current.flex, node, stored, pty, vt, zero)
        seq = next(_seq)
        device = tm.value.device
        stream = _raw_stream(device)
        if len(pairs) == 1:
            s, node = pairs[0]
            dests = [(s.id, s.phase, node, key)]
        else:
            dests = [(s.id, s.phase, node, key) for s, node in pairs]
        persist = _capturing(stream)
        registry[seq] = (is_float, tm.numel, dests, tm if persist else None, persist)
        _launch(_ring_for(device), seq, tm, is_float, stream)


def _apply(records) -> None:
    """Add decoded ``(seq, values)`` records to every live session they were registered for."""
    for seq, values in records:
        info = registry.get(seq)
        if info is None:
            continue
        is_float, numel, dests, _tm, _persist = info
        vals = values.view(np.float64) if is_float else values
        py = [float(x) for x in vals] if is_float else [int(x) for x in vals]
        value = py if numel > 1 else py[0]
        for s_id, phase, node, key in dests:
            session = G.sessions.get(s_id)
            if session is None:
                continue
            pd = session.phases.get(phase)
            if pd is None:
                continue
            tmetrics.add((pd.flex,), node, {key: value})


def _decode(slots):
    out = []
    i = 0
    n = len(slots)
    while i < n:
        seq = int(slots[i])
        info = registry.get(seq)
        if info is None:  # unknown or corrupted: nothing after it can be trusted
            break
        numel = info[1]
        out.append((seq, slots[i + 1:i + 1 + numel]))
        i += 1 + numel
    return out


def synchronize() -> None:
    """Wait for the device (torch's synchronisation; nothing without torch or a GPU)."""
    try:
        import torch  # lazy: torch is optional
        torch.cuda.synchronize()
    except Exception:
        pass


def drain(session=None) -> None:
    """Read every ring and every graph book back (after one device sync) and add the records to
    their sessions."""
    if not _rings:
        graph_metrics.drain(synchronize)   # syncs only when a book has device regions to read
        return
    synchronize()
    graph_metrics.drain()
    with _lock:
        records = []
        for ring in _rings.values():
            records.extend(_decode(ring.take()))
    _apply(records)
    for seq, _values in records:
        info = registry.get(seq)
        if info is not None and not info[4]:
            del registry[seq]
