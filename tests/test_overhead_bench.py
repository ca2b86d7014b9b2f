"""bench/overhead.py: which cases each implementation's worker runs (the timings come from the GPU)."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import overhead  # noqa: E402
from overhead_cases import BASIC_CASES, CASES, GRAPH_CASE, HOOK_CASE  # noqa: E402


@pytest.fixture
def only_graph_case(monkeypatch):
    """The selection ``--cases graph`` makes: CASES holds the graph case alone."""
    kept = {GRAPH_CASE: CASES[GRAPH_CASE]}
    monkeypatch.setattr(overhead, "CASES", kept)
    return kept


def test_the_profilers_run_every_selected_case_and_torch_profiler_only_the_basic_ones():
    assert overhead.cases_of("proton") == overhead.cases_of("proton_ctypes") == tuple(CASES)
    assert overhead.cases_of("torch.profiler") == tuple(c for c in BASIC_CASES if c in CASES)
    assert overhead.cases_of("hook_empty") == (HOOK_CASE,)


def test_an_implementation_with_no_selected_case_runs_none(only_graph_case):
    assert GRAPH_CASE not in BASIC_CASES
    assert overhead.cases_of("torch.profiler") == ()
    assert overhead.cases_of("proton_ctypes") == (GRAPH_CASE,)
    assert overhead.cases_of("bare") == (GRAPH_CASE,)
