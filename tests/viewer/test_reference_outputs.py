"""Our output is byte-identical to the real proton-viewer 3.9 on every reference output.

Each ``data/viewer-3.9.0/*.txt`` starts with the command line that produced it; the rest is the exact
stdout.  ``diff.txt`` is the one we deliberately do not reproduce (Proton prints ``nan`` for nodes present
in only one profile): see test_diff.py.
"""

import shlex

import pytest

from .helpers import REFERENCE_OUTPUTS, run_viewer

CASES = sorted(p.name for p in REFERENCE_OUTPUTS.glob("*.txt") if p.name != "diff.txt")


@pytest.mark.parametrize("name", CASES)
def test_output_matches_proton_viewer_3_9(name, ref_dir):
    text = (REFERENCE_OUTPUTS / name).read_text(encoding="utf-8")
    command, expected = text.split("\n", 1)
    argv = shlex.split(command.lstrip("$ "))
    assert argv[0] == "proton-viewer"
    result = run_viewer(argv[1:], cwd=ref_dir)
    assert result.err == ""
    assert result.code == 0
    assert result.out == expected


def test_every_reference_output_is_checked():
    assert len(CASES) == len(list(REFERENCE_OUTPUTS.glob("*.txt"))) - 1 >= 16
