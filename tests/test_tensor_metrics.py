"""Device-tensor metrics: the record kernel, the ring read-back and the attribution.

The kernel runs under Triton's CPU interpreter (``TRITON_INTERPRET=1``, needs torch) in
a subprocess; the GPU test under tests/gpu runs it for real.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from proton_ctypes.core import tensor_metrics as tm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_decode_walks_records_by_registered_sizes():
    tm.registry[900001] = (False, 1, [], None, False)
    tm.registry[900002] = (True, 3, [], None, False)
    try:
        floats = np.array([0.5, 1.5, 2.5]).view(np.int64)
        slots = np.concatenate([[900001, 7], [900002], floats, [900001, 9]]).astype(np.int64)
        recs = tm._decode(slots)
        assert [r[0] for r in recs] == [900001, 900002, 900001]
        assert recs[1][1].view(np.float64).tolist() == [0.5, 1.5, 2.5]
        assert recs[2][1].tolist() == [9]
    finally:
        del tm.registry[900001], tm.registry[900002]


def test_decode_stops_at_an_unknown_seq():
    tm.registry[900003] = (False, 1, [], None, False)
    try:
        recs = tm._decode(np.array([900003, 1, 123456789, 5, 900003, 2], dtype=np.int64))
        assert [r[1].tolist() for r in recs] == [[1]]
    finally:
        del tm.registry[900003]


INTERPRETED = """
import torch, proton_ctypes as proton
from proton_ctypes.core import tensor_metrics as tm
from proton_ctypes.metric import TensorMetric

class FakeDev:  # a CPU tensor that claims to live on a device, for the interpreter
    def __init__(self, t): self.t = t
    def __getattr__(self, k): return getattr(self.t, k)
    @property
    def device(self):
        class D: type, index = "cuda", 0
        return D()
    def double(self): return FakeDev(self.t.double())
    def long(self): return FakeDev(self.t.long())
    def is_floating_point(self): return self.t.is_floating_point()
    def numel(self): return self.t.numel()
    def data_ptr(self): return self.t.data_ptr()

_orig = tm._launch
def launch(ring, seq, metric, is_float, stream):
    metric.value = metric.value.t if isinstance(metric.value, FakeDev) else metric.value
    _orig(ring, seq, metric, is_float, None)
tm._launch = launch
tm._ring_for = lambda device: tm._rings.setdefault("cpu", tm.Ring("cpu"))

proton.start("dt", backend="host")
for i in range(3):
    with proton.scope("step", {"loss": FakeDev(torch.tensor(0.5 * (i + 1))),
                               "tokens": FakeDev(torch.tensor([1, 2, 3])), "host": 1}):
        pass
proton.finalize()
print(open("dt.hatchet").read())
"""


def test_record_kernel_and_read_back_attribute_values_to_the_scope(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=REPO, PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(INTERPRETED)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    tree = json.loads(r.stdout[r.stdout.index("["):])
    step = tree[0]["children"][0]
    assert step["frame"]["name"] == "step"
    assert step["metrics"] == {"host": 3, "loss": 3.0, "tokens": [3, 6, 9]}


def test_tensor_metric_type_is_checked_when_given():
    import proton_ctypes as proton
    from proton_ctypes.metric import TensorMetric

    class T:
        def __init__(self):
            self.launched = False

        def data_ptr(self):
            return 0

        def numel(self):
            return 1

        def reshape(self, *a):
            return self
    proton.start("ty", backend="host")
    launched = []
    orig = tm._launch
    tm._launch = lambda ring, seq, metric, is_float: launched.append(seq)
    orig_ring = tm._ring_for
    tm._ring_for = lambda device: None
    try:
        with proton.scope("m", {"v": 1}):
            pass
        from proton_ctypes.core import general_path
        from proton_ctypes.core.threads import thread_ctx
        ctx = thread_ctx()
        sid = proton.enter_scope("m")
        targets = [(v, v.top) for v in ctx.views]
        t = T()
        t.device = "cuda"
        with pytest.raises(ValueError, match="current=int64_t, new=double"):
            tm.add_tensor_metrics(ctx, sid, targets, {"v": TensorMetric(t, 1)})
        assert launched == []
        proton.exit_scope()
        del general_path
    finally:
        tm._launch = orig
        tm._ring_for = orig_ring


def test_ring_take_copies_only_the_slots_written_since_the_last_take(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_PROFILE_METRIC_BUFFER_SIZE", "128")  # 16 slots
    ring = tm.Ring("cpu")
    assert ring.size == 16

    def write(k):
        start = int(ring.offset.item())
        for i in range(start, start + k):
            ring.buf[i % ring.size] = i
        ring.offset[0] = start + k

    write(5)
    assert ring.take().tolist() == list(range(5))
    write(12)  # ends exactly at the wrap
    assert ring.take().tolist() == list(range(5, 17))
    write(16)  # a whole ring, starting mid-ring
    assert ring.take().tolist() == list(range(17, 33))
    write(3)
    assert ring.take().tolist() == [33, 34, 35]
    assert ring.take().tolist() == []


def test_an_eager_metric_does_not_keep_its_tensor_alive_until_the_flush(monkeypatch):
    """A training loop gives a device tensor every step and flushes once at the end: the
    tensors of the steps already launched must be free to go (libproton keeps only pointers)."""
    import gc
    import weakref

    import proton_ctypes as proton
    from proton_ctypes.metric import TensorMetric

    class DeviceTensor:
        class device:
            type, index = "cuda", 0

        def data_ptr(self):
            return 0x1000

        def numel(self):
            return 1

    monkeypatch.setattr(tm, "_launch", lambda ring, seq, metric, is_float, stream: None)
    monkeypatch.setattr(tm, "_ring_for", lambda device: None)
    monkeypatch.setattr(tm, "_raw_stream", lambda device: None)
    monkeypatch.setattr(tm, "_capturing", lambda stream: False)
    from proton_ctypes.core.threads import thread_ctx
    proton.start("alive", backend="host")
    try:
        refs = []
        for _ in range(3):
            value = DeviceTensor()
            refs.append(weakref.ref(value))
            sid = proton.enter_scope("step")
            ctx = thread_ctx()
            targets = [(v, v.top) for v in ctx.views]
            tm.add_tensor_metrics(ctx, sid, targets, {"loss": TensorMetric(value, 1)})
            proton.exit_scope()
            del value
        gc.collect()
        assert [r() for r in refs] == [None, None, None]
        assert len([s for s, info in tm.registry.items() if info[2] and info[2][0][3] == "loss"]) >= 3
    finally:
        tm.registry.clear()      # nothing was launched: no record will ever name these
        proton.finalize()
