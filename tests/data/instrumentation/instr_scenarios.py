"""Decode scenarios for the instrumentation tests: generation, and running them on both sides.

A scenario is a JSON-able dict::

    {"mode": "<our mode string>", "libproton_mode": "cuda:<str(mode object)>", "data": "tree"|"trace",
     "kernels": {"<fid>": {"name", "num_warps", "scratch", "names": [[id, name]], "parents": [[id, pid]]}},
     "launches": [{"fid", "buffer": "<file name>", "cpu_scopes": [...]}]}

with the buffers as files next to it.  :func:`run_oracle` runs it through the real
libproton (``oracle_runner.py`` in a subprocess, host-only stubs); :func:`run_ours`
through proton_ctypes in this process (a fake Triton driver; the buffers are handed to
the hook as if the allocator had produced them).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # tests/, for the oracle recipe
from oracle import real_proton  # noqa: E402


def build_stubs() -> str:
    """Build the CUDA stub of this folder (device pointers are host pointers) and the CUPTI
    stub of tests/oracle once; return the folder."""
    return real_proton.build_stubs(os.path.join(HERE, "libcuda_instr_stub.c"))


#: the triton whose libproton decodes as proton_ctypes does (older ones differ on purpose)
ORACLE_TRITON = (3, 9)


def oracle_mismatch():
    """Why this interpreter's libproton is not a decoder to compare with, or None when it is."""
    import triton
    version = tuple(int(part) for part in triton.__version__.split(".")[:2])
    if version < ORACLE_TRITON:
        return (f"triton {triton.__version__}'s libproton decodes as its own release did; proton_ctypes "
                f"decodes as {'.'.join(map(str, ORACLE_TRITON))}'s")
    return None


def write_scenario(sc: dict, buffers: dict, folder: str) -> str:
    """Write ``sc`` and its buffers (file name -> uint8 array) into ``folder``; return the JSON path."""
    os.makedirs(folder, exist_ok=True)
    for name, buf in buffers.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(np.asarray(buf, dtype=np.uint8).tobytes())
    path = os.path.join(folder, "scenario.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    return path


def run_oracle(scenario_path: str, python: str = None):
    """``(output text or None, error 'Type: msg' or None, stderr)`` from the real libproton."""
    stubs = build_stubs()
    folder = os.path.dirname(scenario_path)
    out_base = os.path.join(folder, "oracle_out")
    for ext in (".hatchet", ".chrome_trace", ".hatchet_msgpack", ".error"):
        if os.path.exists(out_base + ext):
            os.remove(out_base + ext)
    r = subprocess.run([python or sys.executable, os.path.join(HERE, "oracle_runner.py"), stubs, scenario_path,
                        out_base], capture_output=True, text=True, timeout=120)
    err = None
    if os.path.exists(out_base + ".error"):
        with open(out_base + ".error") as f:
            err = f.read()
    out = None
    for ext in (".hatchet", ".chrome_trace", ".hatchet_msgpack"):
        if os.path.exists(out_base + ext):
            with open(out_base + ext, "rb" if ext == ".hatchet_msgpack" else "r") as f:
                out = f.read()
    if r.returncode != 0 and err is None:
        raise RuntimeError(f"oracle failed ({r.returncode}): {r.stderr[-2000:]}")
    return out, err, r.stderr


def fake_driver():
    """A Triton driver claiming an sm_90 device, with the device properties the hook reads."""
    class Utils:
        def get_device_properties(self, device):
            return {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 0, "warpSize": 32,
                    "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}

    return real_proton.sm90_driver(Utils())


class _Launch:
    def __init__(self, fid):
        self.data = {"function": fid, "stream": 0}


def active_hook():
    """The active :class:`InstrumentationHook`."""
    from proton_ctypes.hooks.hook import HookManager
    from proton_ctypes.hooks.instrumentation import InstrumentationHook
    return next(h for h in HookManager.active_hooks if isinstance(h, InstrumentationHook))


def run_ours(scenario_path: str, out_base: str):
    """``(output text or None, error 'Type: msg' or None)`` from proton_ctypes (driver must be faked)."""
    import proton_ctypes as proton
    from proton_ctypes.backends.instrumentation.metadata import make_info
    with open(scenario_path) as f:
        sc = json.load(f)
    folder = os.path.dirname(scenario_path)
    data = sc.get("data", "tree")
    proton.start(out_base, backend="instrumentation", data=data, mode=sc["mode"])
    hook = active_hook()
    for fid, k in sc["kernels"].items():
        hook.kernels[int(fid)] = make_info(k["name"], k["num_warps"], k["scratch"], k["names"], k["parents"])
    err = None
    try:
        for launch in sc["launches"]:
            with open(os.path.join(folder, launch["buffer"]), "rb") as f:
                buf = np.frombuffer(bytearray(f.read()), dtype=np.uint8)
            opened = []
            for name in launch.get("cpu_scopes", []):
                opened.append(proton.enter_scope(name))
            md = _Launch(int(launch["fid"]))
            hook.allocator._tls.pending = buf
            hook.enter(md)
            try:
                hook.exit(md)
            finally:
                for name in reversed(launch.get("cpu_scopes", [])):
                    proton.exit_scope(name)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
        from proton_ctypes.hooks.hook import HookManager
        HookManager.unregister()
        from proton_ctypes.core import manager
        for s in list(manager.G.sessions.values()):
            manager.destroy(s)
        return None, err
    fmt = sc.get("format") or ("chrome_trace" if data == "trace" else "hatchet")
    proton.finalize(None, fmt)
    with open(out_base + "." + fmt, "rb" if fmt == "hatchet_msgpack" else "r") as f:
        return f.read(), None


def run_ours_subprocess(scenario_path: str):
    """:func:`run_ours` in a fresh process (call-path nodes of earlier tests cannot reorder children)."""
    folder = os.path.dirname(scenario_path)
    out_base = os.path.join(folder, "ours_out")
    for ext in (".hatchet", ".chrome_trace", ".hatchet_msgpack", ".error"):
        if os.path.exists(out_base + ext):
            os.remove(out_base + ext)
    r = subprocess.run([sys.executable, os.path.join(HERE, "ours_runner.py"), scenario_path, out_base],
                       capture_output=True, text=True, timeout=300)
    err = out = None
    if os.path.exists(out_base + ".error"):
        with open(out_base + ".error") as f:
            err = f.read()
    for ext in (".hatchet", ".chrome_trace", ".hatchet_msgpack"):
        if os.path.exists(out_base + ext):
            with open(out_base + ext, "rb" if ext == ".hatchet_msgpack" else "r") as f:
                out = f.read()
    if r.returncode != 0 and err is None:
        raise RuntimeError(f"ours failed ({r.returncode}): {r.stderr[-2000:]}")
    return out, err, r.stderr


# ----------------------------------------------------------------------------------- generation
def random_scenario(seed: int, data: str = "tree", allow_errors: bool = False, allow_async: bool = True):
    """A random scenario and its buffers (see module docstring)."""
    from proton_ctypes.backends.instrumentation.layout import build_block, build_buffer, scratch_size
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    rng = random.Random(seed)
    opts = []
    if rng.random() < 0.3:
        opts.append("time_shift")
    if rng.random() < 0.2:
        opts.append("clock32")
    mode = "default"
    num_warps = rng.choice([1, 2, 4])
    if rng.random() < 0.25 and num_warps > 1:
        uids = sorted(rng.sample(range(num_warps), rng.randint(1, num_warps)))
        mode += ":sampling_strategy=selective:sampling_options=" + ",".join(map(str, uids))
    else:
        uids = list(range(num_warps))
    if opts:
        mode += ":optimizations=" + ",".join(opts)
    mode_obj = interpret_mode(mode)
    kernels = {}
    buffers = {}
    launches = []
    nk = rng.randint(1, 2)
    for ki in range(nk):
        fid = 100 + ki
        nscopes = rng.randint(1, 4)
        names = [[i, f"s{ki}_{i}" if rng.random() < 0.8 else "dup"] for i in range(nscopes)]
        parents = []
        for i in range(1, nscopes):
            if rng.random() < 0.6:
                parents.append([i, rng.randrange(i)])
        buf_size = rng.choice([64, 128, 256, 1024])
        buf_size = max(8 * len(uids), buf_size - buf_size % (8 * len(uids)))
        scratch = scratch_size(num_warps, buf_size)
        kernels[str(fid)] = {"name": rng.choice(["kern", "matmul_kernel", f"k{ki}"]), "num_warps": num_warps,
                             "scratch": scratch, "names": names, "parents": parents, "buf_size": buf_size}
    for li in range(rng.randint(1, 3)):
        fid = 100 + rng.randrange(nk)
        k = kernels[str(fid)]
        nscopes = len(k["names"])
        blocks = []
        nblocks = rng.randint(1, 4)
        for b in range(nblocks):
            warps = {}
            t0 = rng.randint(0, 1 << 40) if rng.random() < 0.2 else rng.randint(0, 5000)
            for u in uids:
                ents = []
                c = t0 + rng.randint(0, 50)
                stack = []
                for _ in range(rng.randint(0, 10)):
                    r = rng.random()
                    if r < 0.45 and len(stack) < nscopes:
                        sc_id = rng.choice([i for i in range(nscopes) if i not in stack])
                        stack.append(sc_id)
                        ents.append((0, sc_id, c))
                    elif r < 0.85 and stack:
                        ents.append((1, stack.pop(), c))
                    elif r < 0.92:
                        ents.append((rng.randint(0, 1), rng.randrange(nscopes), c))  # mismatch
                    elif allow_async:
                        ents.append((rng.randint(0, 1), rng.randrange(nscopes), c, 1))  # async
                    c += rng.randint(0 if rng.random() < 0.1 else 1, 300)
                    if "clock32" in opts:
                        c &= 0xFFFFFFFF
                if allow_errors and rng.random() < 0.1 and len(ents) >= 2:
                    ents[-1] = (ents[-1][0], ents[-1][1], max(0, ents[-1][2] - 10000)) + tuple(ents[-1][3:])
                warps[u] = ents
            times = (rng.randint(1, 1 << 50), 0, 0)
            times = (times[0], times[0] + rng.randint(0, 10000), times[0] + rng.randint(0, 20000))
            blocks.append(build_block(b if rng.random() < 0.9 else b + 7, rng.randint(0, 131), num_warps,
                                      k["buf_size"], warps, times=times, uids=uids,
                                      scratch=k["scratch"]))
        if rng.random() < 0.1 and len(blocks) > 1:
            bad = bytearray(blocks[1])
            bad[0:4] = b"\0\0\0\0"
            blocks[1] = bytes(bad)
        name = f"launch{li}.bin"
        buffers[name] = build_buffer(blocks, k["scratch"])
        cpu = rng.choice([[], ["a"], ["a", "b"], ["c"]])
        launches.append({"fid": fid, "buffer": name, "cpu_scopes": cpu})
    sc = {"mode": mode, "libproton_mode": "cuda:" + str(mode_obj), "data": data, "kernels": kernels,
          "launches": launches}
    return sc, buffers

