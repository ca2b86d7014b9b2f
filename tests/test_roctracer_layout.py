"""roctracer record layout: pinned from the header text, compiled against inc/, and
cross-checked against the fake's independently written ``struct`` formats."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

from fakes import fake_roctracer as fk
from proton_ctypes.backends.amd import tracer_api as api
from proton_ctypes.backends.amd import layout as L

RECORD_MEMBERS = {"domain": "domain", "kind": "kind", "op": "op", "correlation_id": "correlation_id",
                  "begin_ns": "begin_ns", "end_ns": "end_ns", "device_id": "device_id", "thread_id": "thread_id",
                  "queue_id": "queue_id", "kernel_name": "kernel_name"}


def test_roctracer_record_size_pinned_from_the_header_text():
    # prof_protocol.h: three u32 (domain, kind, op); a union whose widest member holds three u64
    # (correlation_id, begin_ns, end_ns) at 16; a union of {int device_id; uint64_t queue_id} (16 B)
    # at 40; a union {size_t bytes; const char* kernel_name} at 56: 64 bytes.
    assert L.ROCTRACER_RECORD.itemsize == 64
    assert ctypes.sizeof(api.Properties) == 48        # u32 mode (+4), size_t, 4 pointers
    assert (L.ROCTRACER_DOMAIN_HIP_OPS, L.ROCTRACER_DOMAIN_HIP_API) == (2, 3)
    assert (L.HIP_API_DATA_CORRELATION, L.HIP_API_DATA_PHASE) == (0, 8)


def test_roctracer_layout_decodes_the_fakes_independently_packed_records():
    k = np.frombuffer(fk.KERNEL_RECORD.pack(2, 0x11F0, 0, 77, 1000, 2000, -3, 0xABCDEF, 0x1234), L.ROCTRACER_RECORD)[0]
    assert (k["domain"], k["kind"], k["op"], k["correlation_id"], k["begin_ns"], k["end_ns"], k["device_id"],
            k["queue_id"], k["kernel_name"]) == (2, 0x11F0, 0, 77, 1000, 2000, -3, 0xABCDEF, 0x1234)
    a = np.frombuffer(fk.API_RECORD.pack(3, 0, 83, 78, 10, 20, 4321, 8765, 0), L.ROCTRACER_RECORD)[0]
    assert (a["domain"], a["op"], a["correlation_id"], a["begin_ns"], a["thread_id"]) == (3, 83, 78, 10, 8765)
    props = api.Properties(1, 4096, api.ALLOCATOR(), None, api.BUFFER_CALLBACK(), 0x42)
    assert fk.PROPERTIES.unpack(ctypes.string_at(ctypes.addressof(props), 48))[:2] == (1, 4096)
    assert fk.PROPERTIES.unpack(ctypes.string_at(ctypes.addressof(props), 48))[5] == 0x42


def test_roctracer_layout_offsets_match_the_compiled_headers(tmp_path):
    dirs = [d for d in os.environ.get("ROCTRACER_INCLUDE", "").split(os.pathsep) if d]
    if not dirs:
        pytest.skip("set ROCTRACER_INCLUDE to roctracer's inc/ folder to compile the offsetof probe")
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "roctracer.h"', '#include "roctracer_ext.h"',
             '#define O(T,m) printf("%s.%s %zu\\n", #T, #m, offsetof(T,m));', 'int main(void){',
             'printf("sizeof:activity_record_t %zu\\n", sizeof(activity_record_t));',
             'printf("sizeof:roctracer_properties_t %zu\\n", sizeof(roctracer_properties_t));',
             'printf("enum:hip_ops %d\\n", (int)ACTIVITY_DOMAIN_HIP_OPS);',
             'printf("enum:hip_api %d\\n", (int)ACTIVITY_DOMAIN_HIP_API);']
    lines += [f"O(activity_record_t,{m})" for m in RECORD_MEMBERS.values()]
    lines += [f"O(roctracer_properties_t,{f})" for f, _ in api.Properties._fields_]
    lines += ["return 0;}"]
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines))
    proc = subprocess.run([cc, "-std=gnu11", *(f"-I{d}" for d in dirs), str(src), "-o", str(tmp_path / "probe")],
                          capture_output=True, text=True)
    if proc.returncode:
        pytest.fail(f"probe did not compile against {dirs}:\n{proc.stderr[-3000:]}")
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout
    got = dict((k, int(v)) for k, v in (line.split() for line in out.splitlines()))
    assert {f: got[f"activity_record_t.{m}"] for f, m in RECORD_MEMBERS.items()} == \
        {f: L.ROCTRACER_RECORD.fields[f][1] for f in RECORD_MEMBERS}
    assert got["sizeof:activity_record_t"] == L.ROCTRACER_RECORD.itemsize
    assert got["sizeof:roctracer_properties_t"] == ctypes.sizeof(api.Properties)
    assert {f: got[f"roctracer_properties_t.{f}"] for f, _ in api.Properties._fields_} == \
        {f: getattr(api.Properties, f).offset for f, _ in api.Properties._fields_}
    assert (got["enum:hip_ops"], got["enum:hip_api"]) == (api.ACTIVITY_DOMAIN_HIP_OPS, api.ACTIVITY_DOMAIN_HIP_API)
