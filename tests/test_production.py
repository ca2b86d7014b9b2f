"""Production runs (issue 11): per-process names, signals, exit, fork, bounded memory."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proton_ctypes as proton

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(tmp_path, code, env=None, wait=True):
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONWARNINGS="ignore", **(env or {}))
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    if wait:
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_placeholders_in_names_are_expanded_at_write(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    proton.start("run_{rank}_{local_rank}_of_{world_size}_{pid}", backend="host")
    proton.finalize()
    assert os.listdir(".") == [f"run_3_1_of_8_{os.getpid()}.hatchet"]


def test_unknown_braces_are_kept_verbatim():
    proton.start("x_{other}", backend="host")
    proton.finalize()
    assert os.listdir(".") == ["x_{other}.hatchet"]


def test_ranks_of_one_job_never_share_the_default_file(tmp_path):
    code = """
    import proton_ctypes as proton
    proton.start(backend="host")
    with proton.scope("work"):
        pass
    proton.finalize()
    """
    procs = [run_py(tmp_path, code, env={"RANK": str(r), "WORLD_SIZE": "4", "LOCAL_RANK": str(r)}, wait=False)
             for r in range(4)]
    for p in procs:
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert sorted(os.listdir(tmp_path)) == [f"proton.rank{r}.hatchet" for r in range(4)]


def test_live_sessions_are_written_at_interpreter_exit(tmp_path):
    r = run_py(tmp_path, """
    import proton_ctypes as proton
    proton.start("atexit", backend="host")
    with proton.scope("a"):
        pass
    """)
    assert r.returncode == 0, r.stderr
    tree = json.load(open(tmp_path / "atexit.hatchet"))
    assert [c["frame"]["name"] for c in tree[0]["children"]] == ["a"]


def test_forked_child_inherits_no_session(tmp_path):
    r = run_py(tmp_path, """
    import os, proton_ctypes as proton
    proton.start("parent", backend="host")
    with proton.scope("before_fork"):
        pass
    pid = os.fork()
    if pid == 0:
        with proton.scope("in_child"):
            pass
        print("child", proton.flags.flags.profiling_on, len(proton.core.registry.G.sessions))
        os._exit(0)
    os.waitpid(pid, 0)
    with proton.scope("after_fork"):
        pass
    proton.finalize()
    """)
    assert r.returncode == 0, r.stderr
    assert "child False" in r.stdout
    assert sorted(os.listdir(tmp_path)) == ["parent.hatchet"]
    tree = json.load(open(tmp_path / "parent.hatchet"))
    assert [c["frame"]["name"] for c in tree[0]["children"]] == ["before_fork", "after_fork"]


LOOP = """
import sys, proton_ctypes as proton
proton.start("sig", backend="host")
print("ready", flush=True)
i = 0
while True:
    with proton.scope("outer"):
        with proton.scope("inner", {"n": 1}):
            i += 1
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_writes_a_whole_profile_before_the_default_action(tmp_path, signame):
    p = run_py(tmp_path, LOOP, wait=False)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    p.send_signal(getattr(signal, signame))
    p.communicate(timeout=60)
    # SIGTERM: default action (killed); SIGINT: KeyboardInterrupt, which Python ends with SIGINT
    assert p.returncode == -getattr(signal, signame)
    tree = json.load(open(tmp_path / "sig.hatchet"))
    inner = tree[0]["children"][0]["children"][0]
    assert inner["frame"]["name"] == "inner" and inner["metrics"]["n"] > 0


HELD_LOCK = """
import os, signal, sys, threading, time
sys.path.insert(0, os.path.join({repo!r}, "tests"))
from fakes.fake_cupti import FakeCupti, FakeDriver
import proton_ctypes as proton
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.core.registry import G
fake = FakeCupti()
select.register("cupti", lambda: CuptiBackend(lib=fake, driver=FakeDriver(fake)))
handled = []
signal.signal(signal.SIGTERM, lambda s, f: handled.append(s))
proton.start("held", backend="cupti")
with proton.scope("s"):
    for _ in range(100):
        fake.launch("k")
t0 = time.monotonic()
with G.lock:
    # the collector parses what a flush hands back (at its next tick, within a second) and
    # waits for this lock to deliver it, holding its own, which the signal's write needs
    threading.Thread(target=fake.cuptiActivityFlushAll, args=(0,)).start()
    time.sleep(1.5)
    signal.raise_signal(signal.SIGTERM)
    print("handler returned", handled, round(time.monotonic() - t0), flush=True)
proton.finalize()
"""


def test_a_signal_while_the_program_holds_the_profilers_lock_neither_blocks_it_nor_loses_kernels(tmp_path):
    r = run_py(tmp_path, HELD_LOCK.format(repo=REPO))
    assert r.returncode == 0, r.stderr
    assert "handler returned [15]" in r.stdout
    tree = json.load(open(tmp_path / "held.hatchet"))
    assert tree[0]["children"][0]["frame"]["name"] == "s"
    assert tree[0]["children"][0]["children"][0]["metrics"]["count"] == 100


def test_fifty_signals_at_random_points_leave_every_file_whole_or_absent(tmp_path):
    rng = random.Random(1234)
    for batch in range(25):
        procs = []
        for j in range(2):
            d = tmp_path / f"r{batch}_{j}"
            d.mkdir()
            procs.append((d, run_py(d, LOOP, wait=False)))
        for d, p in procs:
            p.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.05))
            p.send_signal(rng.choice([signal.SIGTERM, signal.SIGINT]))
        for d, p in procs:
            p.communicate(timeout=60)
            for f in os.listdir(d):
                assert f == "sig.hatchet", f"stray file {f}"
                json.load(open(d / f))  # whole: parses


def test_scope_log_stays_bounded_over_a_million_events(mock):
    s = proton.start("long", backend="mock", mode="periodic_flushing")
    from proton_ctypes.core.threads import thread_ctx
    for i in range(1000):
        for _ in range(500):
            with proton.scope("step"):
                pass
        mock.launch("k")
        proton.data.advance_phase(s)
        proton.deactivate(s, flushing=True)
        proton.activate(s)
    ctx = thread_ctx()
    held = sum(len(v.log) + sum(len(c) * 2 for c in v.chunks) for v in ctx.views)
    assert held < 20000, held
    assert len(s_phases := proton.core.registry.G.sessions[s].phases) <= 2, len(s_phases)
    proton.finalize()
    files = [f for f in os.listdir(".") if f.startswith("long.part_")]
    assert len(files) == 1001
