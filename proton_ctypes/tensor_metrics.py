"""Device-tensor metrics.

Values of device tensors given as metrics are captured without synchronising at scope
entry: the tensor (cast to int64/float64) is kept alive and read back in bulk when the
session flushes, then added to the node fixed at scope entry.  (The device ring buffer
written by two small Triton kernels, proton-spec §3.5, is the GPU integration's job.)
"""
from __future__ import annotations

from . import recording
from .events import G

#: (session id, phase, node, metric key, TensorMetric) waiting to be read back
pending: list = []


def ensure_kernels() -> None:
    """Prepare the metric kernels (nothing to prepare for the read-back path)."""


def add_tensor_metrics(ctx, sid, targets, tensor: dict) -> None:
    """Remember device-tensor metrics for the target nodes until the next flush."""
    for s, node in recording.session_targets(targets):
        for key, tm in tensor.items():
            pending.append((s.id, s.phase, node, key, tm))


def drain(session) -> None:
    """Read back the pending tensor metrics of ``session`` and add them to its phases."""
    from .tree import metrics as tmetrics
    keep = []
    for rec in pending:
        sid, phase, node, key, tm = rec
        if sid != session.id:
            if sid in G.sessions:
                keep.append(rec)
            continue
        pd = session.phases.get(phase)
        if pd is None:
            continue
        value = tm.value.tolist() if tm.numel > 1 else tm.value.item()
        items = tmetrics.normalize_all({key: value})
        tmetrics.add(pd.flex.setdefault(node, {}), items)
    pending[:] = keep
