"""The kernel record stride: measured by a cuptiActivityGetNextRecord walk, cross-checked with a table."""
import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, started_backend  # noqa: E402

from proton_ctypes.backends.nvidia import layout as cupti_layout  # noqa: E402


@pytest.mark.parametrize("version,size", [(130001, 216), (26, 208), (12080, 208)])
def test_stride_is_walked_on_the_first_kernel_and_matches_the_table(version, size):
    backend, fake, sink = started_backend(FakeCupti(version=version))
    assert backend.kernel_stride == size and backend.stride_source == "version table"
    for _ in range(10):
        fake.launch("k")
    backend.stop()
    assert backend.kernel_stride == size and backend.stride_source == "walk"
    assert len(sink.rows()) == 10 and np.all(sink.rows()["tid"] == threading.get_native_id())


def test_walk_wins_over_the_table_and_warns_when_they_disagree():
    backend, fake, sink = started_backend(FakeCupti(version=130001, record_size=232))
    for _ in range(10):
        fake.launch("k")
    with pytest.warns(RuntimeWarning, match="232-byte kernel records"):
        backend.stop()
    assert backend.kernel_stride == 232
    assert len(sink.rows()) == 10 and backend.dropped == 0


def test_version_table():
    assert cupti_layout.expected_kernel_stride(130001) == 216
    assert cupti_layout.expected_kernel_stride(26) == 208
    with pytest.raises(ValueError):
        cupti_layout.kernel_dtype(100)
