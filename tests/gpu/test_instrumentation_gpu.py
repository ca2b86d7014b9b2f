"""The instrumentation backend on a GPU, compared with real Proton (see instr_gpu.py).

As a pytest module it needs a CUDA GPU and ``triton.profiler`` (skipped otherwise).  As a
script (``python tests/gpu/test_instrumentation_gpu.py --device-run OUT``) it runs every
configuration and writes ``instr_summary.json`` and ``instr_h200.tar.gz`` (outputs,
captured buffers, kernel layouts: the data of ``tests/test_instrumentation_h200.py``) into
OUT.  Tolerances and configurations: ``tests/data/instrumentation/instr_gpu.py``.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "data", "instrumentation"))

import instr_gpu as G  # noqa: E402


def _gpu_available():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


if __name__ != "__main__":
    import pytest

    if not _gpu_available():
        pytest.skip("no CUDA GPU", allow_module_level=True)
    pytest.importorskip("triton.profiler")

    @pytest.fixture(scope="module")
    def gpu_summary(tmp_path_factory):
        """All configurations, run once."""
        return G.device_run(str(tmp_path_factory.mktemp("instr_gpu")))

    @pytest.mark.parametrize("config", [c[0] for c in G.CONFIGS])
    def test_exact_decode_of_protons_buffers(gpu_summary, config):
        """Proton's buffers decoded by proton_ctypes give Proton's output."""
        res = gpu_summary["configs"][config]
        assert "error" not in res, res.get("error")
        assert res["exact_problems"] == []

    @pytest.mark.parametrize("config", [c[0] for c in G.CONFIGS])
    def test_live_run_matches_proton(gpu_summary, config):
        """The same kernels under proton_ctypes: same nodes, cycles within LIVE_TOLERANCE."""
        res = gpu_summary["configs"][config]
        assert "error" not in res, res.get("error")
        assert res["live_problems"] == []


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--device-run":
        os.makedirs(sys.argv[2], exist_ok=True)
        s = G.device_run(sys.argv[2])
        bad = [n for n, r in s["configs"].items()
               if r.get("error") or r.get("exact_problems") or r.get("live_problems")]
        print("configs with problems:", bad)
    else:
        print(__doc__)
