"""Run programs of :mod:`.dsl` under one implementation, each in a forked child of one process.

Usage: ``python -m programs.worker {real|ours}`` (with ``tests/`` on ``sys.path``), then one JSON
line per program on stdin, ``{"program": [...], "outdir": "..."}``; for each it answers one line
(``ok`` or the child's failure) once the child wrote its files and ``outdir/result.json``
(``{"values": {...}, "error": None}``, as the conformance scenarios do).  The profiler is loaded once;
forking gives every program a fresh profiler in a few milliseconds.  Session names are flattened
into one folder (:func:`flat`), since Proton cannot write into a missing folder.
"""
import json
import os
import signal
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

#: seconds a program may run before its child is killed
PROGRAM_TIMEOUT_S = 30


def load(impl):
    """The profiler module of ``impl``."""
    if impl == "real":
        from oracle.real_proton import load as load_real
        return load_real()
    warnings.simplefilter("ignore")
    import proton_ctypes
    from proton_ctypes.backends import select
    select.target_backend()  # imports triton once here, not in every child (a second each)
    return proton_ctypes


def flat(name):
    """``sub/p1`` -> ``sub_p1``: every file in one folder (Proton cannot write into a missing one)."""
    return name.replace(os.sep, "_").replace("/", "_")


def run_child(proton, program, outdir):
    """In the forked child: run ``program`` writing into ``outdir``; never returns."""
    from programs.dsl import Interpreter
    code = 0
    try:
        signal.alarm(PROGRAM_TIMEOUT_S)
        os.chdir(outdir)
        values = {}
        interp = Interpreter(proton, lambda name: os.path.join(outdir, flat(name)), values.__setitem__)
        for op in program:
            interp.run(op)
        interp.end()
        with open(os.path.join(outdir, "result.json"), "w") as f:
            json.dump({"values": values, "error": None}, f, default=repr)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        code = 1
    finally:
        os._exit(code)


def main():
    proton = load(sys.argv[1])
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(proton, job["program"], job["outdir"])
        _, status = os.waitpid(pid, 0)
        sys.stdout.write("ok\n" if status == 0 else f"child failed with status {status}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
