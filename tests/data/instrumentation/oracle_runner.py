"""Run a decode scenario through the REAL libproton instrumentation profiler, host-only.

Usage: python oracle_runner.py <stub_dir> <scenario.json> <out_base>

``stub_dir`` holds ``libcuda.so.1`` built from ``libcuda_instr_stub.c`` (device pointers
are host pointers, copies are memcpy) and the CUPTI stub of ``tests/oracle``.  The
scenario names kernels (layout, scope names/parents) and launches (a buffer file and the
CPU scopes open around it); each launch goes through libproton's
``init_function_metadata`` / ``enter_instrumented_op`` / ``exit_instrumented_op`` as
Proton's hook calls them, then the session is finalized to ``<out_base>.hatchet`` or
``.chrome_trace``.  A libproton exception is written to ``<out_base>.error`` as
``Type: message``.  Works with triton 3.6 and 3.9 (whichever this interpreter imports).
"""
import json
import os
import sys


def main():
    stub_dir, scenario_path, out_base = sys.argv[1:4]
    # the oracle recipe of tests/oracle (runs under any triton this interpreter imports)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from oracle.real_proton import start_host_only
    start_host_only(stub_dir)
    import numpy as np
    from triton._C.libproton import proton as lp

    with open(scenario_path) as f:
        sc = json.load(f)
    base_dir = os.path.dirname(os.path.abspath(scenario_path))
    sid = lp.start(out_base, "shadow", sc.get("data", "tree"), "instrumentation", sc["libproton_mode"])
    for fid, k in sc["kernels"].items():
        md = os.path.join(base_dir, f"kernel_{fid}.json")
        with open(md, "w") as f:
            json.dump({"num_warps": k["num_warps"], "profile_scratch_size": k["scratch"], "name": k["name"],
                       "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}, f)
        lp.init_function_metadata(int(fid), k["name"], [tuple(x) for x in k["names"]],
                                  [tuple(x) for x in k["parents"]], md)
    keep = []
    scope_id = 1 << 40
    try:
        for launch in sc["launches"]:
            with open(os.path.join(base_dir, launch["buffer"]), "rb") as f:
                buf = np.frombuffer(bytearray(f.read()), dtype=np.uint8).copy()
            keep.append(buf)
            opened = []
            for name in launch.get("cpu_scopes", []):
                scope_id += 1
                lp.enter_scope(scope_id, name)
                opened.append((scope_id, name))
            ptr = buf.ctypes.data if len(buf) else 0
            lp.enter_instrumented_op(0, int(launch["fid"]), ptr, len(buf))
            lp.exit_instrumented_op(0, int(launch["fid"]), ptr, len(buf))
            for s, name in reversed(opened):
                lp.exit_scope(s, name)
    except Exception as e:  # the libproton error the launch would raise
        with open(out_base + ".error", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        sys.stderr.flush()
        os._exit(0)
    lp.finalize(sid, sc.get("format") or ("chrome_trace" if sc.get("data") == "trace" else "hatchet"))


if __name__ == "__main__":
    main()
