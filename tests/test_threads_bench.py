"""bench/threads.py: its rows and its file, with the GPU workers stood in for (the timings come
from the GPU; here: what a run cut short leaves behind)."""
import json
import pathlib
import subprocess
import sys
import types

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import threads  # noqa: E402


def _worker_result(cmd):
    impl = cmd[cmd.index("--worker") + 1]
    n = int(cmd[cmd.index("--threads") + 1]) * int(cmd[cmd.index("--launches") + 1])
    wall = 3.0 if impl == "proton" else 2.0
    res = {"wall_s": wall, "bare_s": 1.0, "bare_before_after_s": [1.0, 1.0], "kernels": n, "expected": n,
           "finalize_s": 0.1, "rss_growth_mb": 0.5}
    return types.SimpleNamespace(returncode=0, stdout=json.dumps(res) + "\n", stderr="")


def test_the_file_holds_every_finished_round_and_the_ratio_of_their_medians(monkeypatch, tmp_path):
    out = tmp_path / "threads.json"
    files = []

    def fake_run(cmd, **kwargs):
        if "--worker" not in cmd:          # what results_file asks of the machine
            return types.SimpleNamespace(returncode=1, stdout="", stderr="")
        if len(files) >= 2:                # the run is cut in its third round
            raise KeyboardInterrupt
        return _worker_result(cmd)
    real_write = threads.results_file.write

    def write(path, rows, **kw):
        real_write(path, rows, **kw)
        files.append(json.loads(pathlib.Path(path).read_text()))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(threads.results_file, "write", write)
    monkeypatch.setattr(sys, "argv", ["threads.py", "--threads", "4", "--launches", "10", "--rounds", "3",
                                      "--impls", "proton,proton_ctypes", "--data", "tree", "--json", str(out)])
    try:
        threads.main()
    except KeyboardInterrupt:
        pass
    kept = json.loads(out.read_text())["rows"]
    ours = next(r for r in kept if r["impl"] == "proton_ctypes")
    assert len(files) == 2 and len(ours["kernels_every_round"]) == 2     # both finished rounds are there
    assert ours["ratio_to_proton"] == 0.5                               # (2 - 1) / (3 - 1)
    assert ours["kernels"] == ours["expected_kernels"] == 40


def test_a_churn_under_one_is_refused_with_one_line_before_any_process_starts(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: started.append(cmd))
    monkeypatch.setattr(sys, "argv", ["threads.py", "--churn", "0", "--worker", "proton_ctypes", "tree"])
    with pytest.raises(SystemExit) as exc:
        threads.main()
    assert exc.value.code == 2
    assert "--churn" in capsys.readouterr().err and not started
