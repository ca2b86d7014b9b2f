"""Run one scenario under one implementation in this process; write what it produced.

Usage: ``python run_scenario.py {real|ours} AREA.SCENARIO OUTDIR`` (e.g. ``scope.nested``;
an area is a module of ``scenarios/``).  Writes the scenario's files into OUTDIR and
``OUTDIR/result.json`` with the recorded values and the exception (type and message) if
one escaped.
"""
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))


def main():
    impl, qualname, outdir = sys.argv[1:4]
    area, name = qualname.split(".")
    os.makedirs(outdir, exist_ok=True)
    if impl == "real":
        from oracle.real_proton import load
        proton = load()
    else:
        warnings.simplefilter("ignore")
        import proton_ctypes as proton
    from conformance import scenarios
    rec = {}

    def record(k, v):
        rec[k] = v

    err = None
    try:
        scenarios.get(area, name)(proton, lambda n: os.path.join(outdir, n), record)
    except BaseException as e:  # noqa: BLE001 - we compare what escaped
        err = f"{type(e).__name__}: {e}"
    with open(os.path.join(outdir, "result.json"), "w") as f:
        json.dump({"values": rec, "error": err}, f, default=repr)
    os._exit(0)


if __name__ == "__main__":
    main()
