"""The device half of metrics inside CUDA graphs: the kernel captured per metric, its memory.

While a stream is captured, each device-tensor metric launches :func:`get_kernel`'s kernel
on it, so the kernel becomes a node of the graph and runs at every replay.  It counts its
own runs in the first word of its region, reads the replay's bank from the book's bank word
(device memory) and adds the tensor's values into that bank with atomics.  The graph-launch
callback rewrites the bank word only when the bank changes, with a memset queued on the
replay's stream ahead of the replay (:func:`_bank_writer`): no host synchronisation, no copy
per replay, and no read across PCIe on the GPU (a host-mapped table read at every replay
cost each metric kernel about 1 µs on an H100: ``tests/gpu/probe_graph_bank.py``).
:func:`proton_ctypes.core.graph_metrics.drain` reads the regions at flush.

Memory is taken outside the capture where it can be: :func:`reserve` (called wherever the
metric kernels are prepared, as Proton's ``set_metric_kernels``) zero-fills an arena on the
device; a capture that finds none free allocates on a side stream that is not captured.
"""
from __future__ import annotations

import sys
import threading

from .optional import require
from ..backends.nvidia import driver as cuda_driver
from ..backends.nvidia.driver import CudaError
from . import graph_metrics
from ..tree import metrics as tmetrics

#: words of the device arena regions are carved from (8 bytes each)
ARENA_WORDS = 1 << 18
#: words of a book's bank word (an int64 the memset writes the low half of: banks are small)
BANK_WORDS = 1
#: the name every metric kernel of ours has (the launch hook ignores it; a replayed one is ``<metric>``)
KERNEL_NAME = "write_metric_record"
BLOCK = 128

_kernel = None
_lock = threading.Lock()
#: device -> [arena tensor, next free word]
_arenas: dict = {}
#: every arena handed out, kept alive for as long as the process (a graph's kernels keep
#: writing into its regions at each replay)
_keep: list = []


def get_kernel():
    """The Triton kernel a captured metric runs at each replay (compiled on first use)."""
    global _kernel
    if _kernel is None:
        require("a device-tensor metric", "triton", "triton")
        import triton  # lazy: triton is optional
        import triton.language as tl  # lazy: triton is optional

        @triton.jit(do_not_specialize=["region_ptr", "bank_ptr", "value_ptr", "n"])
        def write_metric_record(region_ptr, bank_ptr, value_ptr, n,
                                IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
            # count this run (nothing waits for the old value), then the bank the host chose
            tl.atomic_add(region_ptr, 1, sem="relaxed")
            bank = tl.load(bank_ptr, volatile=True).to(tl.int64)
            base = region_ptr + 1 + bank * n
            for start in range(0, n, BLOCK):
                idx = start + tl.arange(0, BLOCK)
                m = idx < n
                v = tl.load(value_ptr + idx, mask=m)
                if IS_FLOAT:
                    fbase = base.to(tl.pointer_type(tl.float64), bitcast=True)
                    tl.atomic_add(fbase + idx, v.to(tl.float64), mask=m, sem="relaxed")
                else:
                    tl.atomic_add(base + idx, v.to(tl.int64), mask=m, sem="relaxed")

        _kernel = write_metric_record
    return _kernel


def _zeroed(shape_words: int, device, capturing: bool):
    """Zeroed int64 words on ``device``, zeroed by a copy from pinned zeros, not by a fill
    kernel (no kernel of ours may show in the profile)."""
    import torch  # lazy: torch is optional
    zeros = torch.zeros(shape_words, dtype=torch.int64, pin_memory=True)
    if not capturing:
        return torch.empty(shape_words, dtype=torch.int64, device=device).copy_(zeros)
    # inside a capture: copy on a stream that is not captured, so nothing joins the graph
    side = torch.cuda.Stream(device=device)
    with torch.cuda.stream(side):
        t = torch.empty(shape_words, dtype=torch.int64, device=device).copy_(zeros)
    side.synchronize()
    return t


def reserve(device) -> None:
    """Make sure an arena with room exists for ``device`` (outside a capture); best effort: a
    capture that finds none allocates its own."""
    if getattr(device, "type", None) != "cuda":
        return
    arena = _arenas.get(device)
    if arena is not None and arena[1] * 2 < len(arena[0]):
        return
    try:
        _reserve(device)
    except Exception:  # no torch, no memory: the capture path tries again
        pass


def capture_edge(begin: bool) -> None:
    """The backend's capture callback (:attr:`Backend.graph_hooks`): at a capture's begin, before
    the stream captures, reserve the memory its metrics will need (as libproton reserves its
    metric buffer there); then :func:`graph_metrics.capture_edge`."""
    if begin:
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                device = torch.device("cuda", torch.cuda.current_device())
                reserve(device)
                _warm(device)
            except Exception:
                pass
    graph_metrics.capture_edge(begin)


#: devices the kernel was compiled and loaded for (the common value dtypes)
_warmed: set = set()


def _warm(device) -> None:
    """Compile and load the kernel for float32 and int64 values before the capture starts, so the
    first captured metric does not load a module while the stream captures."""
    if device in _warmed:
        return
    _warmed.add(device)
    import torch  # lazy: torch is optional
    with _lock:
        arena = _arenas.get(device)
    if arena is None:
        return
    for dtype, is_float in ((torch.float32, True), (torch.int64, False)):
        value = torch.empty(1, dtype=dtype, device=device)   # no fill kernel: warmup launches nothing
        get_kernel().warmup(arena[0], arena[0], value, 1, IS_FLOAT=is_float,
                            BLOCK=BLOCK, grid=(1,), num_warps=1)._init_handles()


def _reserve(device) -> None:
    with _lock:
        arena = _arenas.get(device)
        if arena is None or arena[1] * 2 >= len(arena[0]):
            _arenas[device] = [_zeroed(ARENA_WORDS, device, False), 0]
            _keep.append(_arenas[device][0])


def _region(device, words: int, capturing: bool):
    with _lock:
        arena = _arenas.get(device)
        if arena is None or arena[1] + words > len(arena[0]):
            arena = _arenas[device] = [_zeroed(max(ARENA_WORDS, words), device, capturing), 0]
            _keep.append(arena[0])
        lo = arena[1]
        arena[1] = lo + words
        return arena[0][lo:lo + words]


def _bank_writer(word):
    """:attr:`Book.write` for the bank word ``word`` (a one-word region): a memset queued on the
    replay's stream; after a replay on another stream, that stream's queue is waited for first
    (an executable graph's replays run one after the other, whatever their streams)."""
    address, event = word.data_ptr(), []

    def write(bank: int, stream, previous) -> None:
        drv = cuda_driver.required_driver()
        stream = stream or 0
        after = None
        if previous is not None and previous != stream:
            if not event:
                event.append(drv.ordering_event())
            after = (event[0], previous)
        drv.write32_async(address, bank, stream, after)
    return write


def book_for(graph, device):
    """The book of the graph being captured (made at its first metric), with its bank word."""
    book = graph_metrics.capture_book(graph)
    if book is None:
        word = _region(device, BANK_WORDS, True)
        book = graph_metrics.new_book(graph, _bank_writer(word))
        book.bank_word = word
    return book


def capture_tensor_metrics(graph, pairs, tensor: dict, launch) -> None:
    """Register each device-tensor metric of ``tensor`` in ``graph``'s book and launch its kernel
    (``launch(region, table, value, numel, is_float)``) into the capture; ``pairs``: the
    ``(session, node)`` targets at capture."""
    dests = [(s.id, node) for s, node in pairs]
    for key in sorted(tensor):
        tm = tensor[key]
        device = tm.value.device
        book = book_for(graph, device)
        is_float = tm.metric_type_index in (tmetrics.DOUBLE, tmetrics.VDOUBLE)
        region = _region(device, book.region_words(tm.numel), True)
        book.slots.append(graph_metrics.Slot(key, is_float, tm.numel, list(dests), region=region))
        launch(region, book.bank_word, tm.value, tm.numel, is_float)


def current_capture(device=None):
    """``(CUgraph handle, device)`` of the capture the current stream (of ``device``, default the
    current CUDA device) is in, or None: not capturing, no torch, no driver."""
    torch = sys.modules.get("torch")
    drv = cuda_driver.driver() if torch is not None else None
    if drv is None:
        return None
    try:
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if getattr(device, "type", None) != "cuda":
            return None
        index = device.index if device.index is not None else torch.cuda.current_device()
        graph = drv.capture_graph(torch._C._cuda_getCurrentRawStream(index))
    except (CudaError, AttributeError, RuntimeError):
        return None
    return None if graph is None else (graph, device)


def capture_host_metrics(pairs, scalar: dict) -> bool:
    """Host numbers given while the current stream is captured: registered in the graph's book
    (each replay adds them, nothing is added now) and True; False when not capturing."""
    cap = current_capture()
    if cap is None:
        return False
    graph, device = cap
    dests = [(s.id, node) for s, node in pairs if s.data != "trace"]
    items = [(key, tmetrics.normalize(key, scalar[key])) for key in sorted(scalar)]  # Proton's errors first
    book = book_for(graph, device)
    for key, (_stored, _pty, vt, val) in items:
        numel = len(val) if vt >= tmetrics.VINT else 1
        is_float = vt in (tmetrics.DOUBLE, tmetrics.VDOUBLE)
        book.slots.append(graph_metrics.Slot(key, is_float, numel, list(dests), const=val))
    return True


def launch_triton(region, bank_word, value, numel: int, is_float: bool) -> None:
    """Launch the captured metric kernel through Triton on the current stream."""
    if value.dim() != 1:
        value = value.reshape(-1)
    get_kernel()[(1,)](region, bank_word, value, numel, IS_FLOAT=is_float, BLOCK=BLOCK, num_warps=1)
