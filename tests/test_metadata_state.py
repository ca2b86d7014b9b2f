"""``metadata_state(kernel)`` is filed as two frames, ``__proton_launch_metadata/<kernel>``,
while other states keep their name whole, ``:`` included (real Proton 3.9, CPU oracle)."""
import pytest

import proton_ctypes as proton
from proton_ctypes.state import COMPUTE_METADATA_SCOPE_NAME


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("md", backend="host")
    yield s
    proton.finalize()


def _child(node, name):
    return next(c for c in node["children"] if c["frame"]["name"] == name)


def test_metadata_state_of_a_kernel_is_two_frames(session):
    with proton.scope("s"):
        with proton.metadata_state("k"):
            with proton.scope("m", {"v": 1}):
                pass
    root = proton.data.get(session)[0]
    m = _child(_child(root, "s"), "m")
    md = _child(m, COMPUTE_METADATA_SCOPE_NAME)
    assert [c["frame"]["name"] for c in m["children"]] == [COMPUTE_METADATA_SCOPE_NAME]
    assert _child(md, "k")["metrics"] == {"v": 1}


def test_a_state_with_a_colon_stays_one_frame(session):
    with proton.scope("s"):
        with proton.state("x:y"):
            with proton.scope("in"):
                pass
    root = proton.data.get(session)[0]
    inner = _child(_child(root, "s"), "in")
    assert [c["frame"]["name"] for c in inner["children"]] == ["x:y"]
