"""``data.clear``: a cleared current phase is empty, a cleared earlier phase has no data
(real Proton 3.9, CPU oracle)."""
import pytest

import proton_ctypes as proton


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("clear", backend="host")
    yield s
    proton.finalize()


EMPTY = [{"children": [], "frame": {"name": "ROOT", "type": "function"}, "metrics": {}}, {}]


def test_clearing_the_current_phase_leaves_an_empty_tree(session):
    with proton.scope("test0"):
        pass
    proton.deactivate(session, flushing=True)
    proton.data.clear(session)
    assert proton.data.get(session) == EMPTY


def test_the_cleared_current_phase_records_again_after_activate(session):
    with proton.scope("test0"):
        pass
    proton.deactivate(session, flushing=True)
    proton.data.clear(session)
    proton.activate(session)
    with proton.scope("test1"):
        pass
    root = proton.data.get(session)[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["test1"]


def test_clearing_up_to_the_current_phase_empties_it_and_drops_the_earlier_ones(session):
    with proton.scope("phase0"):
        pass
    phase1 = proton.data.advance_phase(session)
    with proton.scope("phase1"):
        pass
    proton.data.clear(session, phase=phase1, clear_up_to_phase=True)
    assert proton.data.get(session, phase=phase1) == EMPTY
    with pytest.raises(IndexError, match=r"^\[PROTON\] Phase 0 has no data\.$"):
        proton.data.get(session, phase=0)
