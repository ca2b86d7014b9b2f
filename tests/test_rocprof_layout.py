"""rocprofiler-sdk record layouts: pinned from the header text, compiled against the headers,
and cross-checked against the fake's independently written ``struct`` formats."""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from fakes import fake_rocprofiler as fk
from proton_ctypes.backends.amd import sdk_api as api
from proton_ctypes.backends.amd import layout as L

#: dtype field -> C member designator, per (dtype, C type)
KD_MEMBERS = {"size": "size", "kind": "kind", "operation": "operation", "corr_internal": "correlation_id.internal",
              "corr_external": "correlation_id.external", "thread_id": "thread_id", "start": "start_timestamp",
              "end": "end_timestamp", "info_size": "dispatch_info.size", "agent_id": "dispatch_info.agent_id",
              "queue_id": "dispatch_info.queue_id", "kernel_id": "dispatch_info.kernel_id",
              "dispatch_id": "dispatch_info.dispatch_id",
              "private_segment_size": "dispatch_info.private_segment_size",
              "group_segment_size": "dispatch_info.group_segment_size",
              **{f"workgroup_{a}": f"dispatch_info.workgroup_size.{a}" for a in "xyz"},
              **{f"grid_{a}": f"dispatch_info.grid_size.{a}" for a in "xyz"}}
HIP_MEMBERS = {"size": "size", "kind": "kind", "operation": "operation", "corr_internal": "correlation_id.internal",
               "corr_external": "correlation_id.external", "start": "start_timestamp", "end": "end_timestamp",
               "thread_id": "thread_id"}
STRUCTS = [  # (dtype, C type, members, header that declares it)
    (L.RECORD_HEADER, "rocprofiler_record_header_t", {k: k for k in ("category", "kind", "payload")}, "fwd.h"),
    (L.KERNEL_DISPATCH, "rocprofiler_buffer_tracing_kernel_dispatch_record_t", KD_MEMBERS, "buffer_tracing.h"),
    (L.AGENT_V0, "rocprofiler_agent_v0_t", {k: k for k in L.AGENT_V0.names}, "agent.h"),
    (L.AGENT_MEM_BANK, "rocprofiler_agent_mem_bank_t", {k: k for k in L.AGENT_MEM_BANK.names}, "agent.h"),
]
HIP_TYPE = "rocprofiler_buffer_tracing_hip_api_record_t"
CB_TYPE = "rocprofiler_callback_tracing_record_t"
SYMBOL_TYPE = "rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t"
ENUMS = {"ROCPROFILER_BUFFER_CATEGORY_TRACING": api.BUFFER_CATEGORY_TRACING,
         "ROCPROFILER_AGENT_TYPE_GPU": api.AGENT_TYPE_GPU,
         "ROCPROFILER_AGENT_INFO_VERSION_0": api.AGENT_INFO_VERSION_0,
         "ROCPROFILER_CALLBACK_PHASE_LOAD": api.CALLBACK_PHASE_LOAD,
         "ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT": api.CALLBACK_TRACING_CODE_OBJECT,
         "ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER": api.CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER,
         "ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API": api.BUFFER_TRACING_HIP_RUNTIME_API,
         "ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH": api.BUFFER_TRACING_KERNEL_DISPATCH,
         "ROCPROFILER_BUFFER_POLICY_LOSSLESS": api.BUFFER_POLICY_LOSSLESS,
         "ROCPROFILER_EXTERNAL_CORRELATION_REQUEST_HIP_RUNTIME_API": api.EXTERNAL_CORRELATION_REQUEST_HIP_RUNTIME_API}


def test_rocprof_record_sizes_pinned_from_the_0_5_0_header_text():
    # fwd.h: static_assert(sizeof(rocprofiler_kernel_dispatch_info_t) == 128,
    #        "Increasing the size of the kernel dispatch info is not permitted")
    assert L.KERNEL_DISPATCH_INFO_SIZE == 128
    # buffer_tracing.h: size u64, kind/operation enums, correlation_id {u64, user_data}, thread_id,
    # start/end timestamps (u64), then the 128-byte dispatch_info: 8+4+4+16+8+8+8 = 56, + 128
    assert L.KERNEL_DISPATCH.itemsize == 184
    assert L.HIP_API_V0.itemsize == 56 and L.HIP_API_V1.itemsize == 64   # 1.x: correlation_id.ancestor
    assert L.RECORD_HEADER.itemsize == 16               # union{category,kind | hash} + void* payload
    assert L.AGENT_V0.itemsize == 296 and L.AGENT_MEM_BANK.itemsize == 24
    assert L.KERNEL_SYMBOL.itemsize == 72                # 5 x u64 + 7 x u32, padded to 8
    assert L.CALLBACK_RECORD_SIZES == {"v0": 56, "v1": 64}
    assert ctypes.sizeof(api.ToolConfigureResult) == 32 and ctypes.sizeof(api.ClientId) == 16
    assert ctypes.sizeof(api.CallbackRecordRaw) == 64


def _vals(fmt, salt):
    out = []
    for i, c in enumerate(re.findall(r"\d*[A-Za-z]", fmt)):
        n = int(c[:-1] or 1) if c[-1] not in "x" else 0
        bits = {"Q": 63, "q": 62, "I": 31, "i": 30, "H": 15}[c[-1]] if n else 0
        out += [(salt * 131 + i * 17 + k) % (1 << bits) for k in range(n)]
    return out


def _decode(struct_obj, dtype, names):
    vals = _vals(struct_obj.format, 7)
    raw = struct_obj.pack(*vals)
    return dict(zip(names, vals)), np.frombuffer(raw[:dtype.itemsize].ljust(dtype.itemsize, b"\0"), dtype)[0]


def test_rocprof_layout_decodes_the_fakes_independently_packed_records():
    kd_names = ["size", "kind", "operation", "corr_internal", "corr_external", "thread_id", "start", "end",
                "info_size", "agent_id", "queue_id", "kernel_id", "dispatch_id", "private_segment_size",
                "group_segment_size", "workgroup_x", "workgroup_y", "workgroup_z", "grid_x", "grid_y", "grid_z"]
    for fmt in (fk.KERNEL_DISPATCH_0, fk.KERNEL_DISPATCH_1):
        want, rec = _decode(fmt, L.KERNEL_DISPATCH, kd_names)
        assert {k: int(rec[k]) for k in kd_names} == want
    hip0 = ["size", "kind", "operation", "corr_internal", "corr_external", "start", "end", "thread_id"]
    want, rec = _decode(fk.HIP_API_0, L.HIP_API_V0, hip0)
    assert {k: int(rec[k]) for k in hip0} == want
    hip1 = hip0[:5] + ["corr_ancestor"] + hip0[5:]
    want, rec = _decode(fk.HIP_API_1, L.HIP_API_V1, hip1)
    assert {k: int(rec[k]) for k in hip1} == want
    want, rec = _decode(fk.AGENT, L.AGENT_V0, [k for k, _ in fk.AGENT_FIELDS])
    assert {k: int(rec[k]) for k in L.AGENT_V0.names} == {k: want[k] for k in L.AGENT_V0.names}
    sym = ["size", "kernel_id", "code_object_id", "kernel_name", "kernel_object"]
    want, rec = _decode(fk.SYMBOL_0, L.KERNEL_SYMBOL, sym)
    assert {k: int(rec[k]) for k in sym} == want
    want, rec = _decode(fk.HEADER, L.RECORD_HEADER, ["category", "kind", "payload"])
    assert {k: int(rec[k]) for k in L.RECORD_HEADER.names} == want


@pytest.mark.parametrize("fmt,layout", [(fk.CB_RECORD_0, "v0"), (fk.CB_RECORD_1, "v1")])
def test_rocprof_callback_record_decodes_both_layouts(fmt, layout):
    n = 3 if layout == "v1" else 2
    raw = fmt.pack(5, 6, *range(100, 100 + n), api.CALLBACK_TRACING_CODE_OBJECT, 2, 1, 0xBEEF)
    words = np.frombuffer(raw.ljust(64, b"\0"), "<u8")
    assert L.callback_record_fields(words, api.CALLBACK_TRACING_CODE_OBJECT) == (layout, 10, 2, 1, 0xBEEF)


# ------------------------------------------------------------------ compiled probe
def _include_dirs(var):
    dirs = [d for d in os.environ.get(var, "").split(os.pathsep) if d]
    if not dirs:
        pytest.skip(f"set {var} to the header folder(s) (os.pathsep-separated) to compile the offsetof probe")
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    return cc, dirs


def _run_probe(cc, dirs, source, tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(source)
    exe = tmp_path / "probe"
    proc = subprocess.run([cc, "-std=gnu11", *(f"-I{d}" for d in dirs), str(src), "-o", str(exe)],
                          capture_output=True, text=True)
    if proc.returncode:
        pytest.fail(f"probe did not compile against {dirs}:\n{proc.stderr[-3000:]}")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return dict((k, int(v)) for k, v in (line.split() for line in out.splitlines()))


def test_rocprof_layout_offsets_match_the_compiled_sdk_headers(tmp_path):
    cc, dirs = _include_dirs("ROCPROFILER_SDK_INCLUDE")
    lines = ["#include <stdio.h>", "#include <stddef.h>"]
    lines += [f"#include <rocprofiler-sdk/{h}>" for h in ("fwd.h", "agent.h", "buffer_tracing.h", "registration.h",
                                                           "external_correlation.h", "buffer.h", "context.h")]
    lines += ["#if __has_include(<hip/hip_runtime_api.h>)", "#include <rocprofiler-sdk/callback_tracing.h>",
              "#define HAVE_CB 1", "#endif", "#define O(T,m,k) printf(\"%s %zu\\n\", k, offsetof(T,m));",
              "#define S(T) printf(\"sizeof:%s %zu\\n\", #T, sizeof(T));", "int main(void){"]
    for dt, ctype, members, _ in STRUCTS:
        lines.append(f"S({ctype})")
        lines += [f'O({ctype},{m},"{ctype}.{f}")' for f, m in members.items()]
    lines += [f"S({HIP_TYPE})", "S(rocprofiler_correlation_id_t)", "S(rocprofiler_kernel_dispatch_info_t)",
              f"S({CB_TYPE})", "S(rocprofiler_tool_configure_result_t)", "S(rocprofiler_client_id_t)"]
    lines += [f'O({HIP_TYPE},{m},"{HIP_TYPE}.{f}")' for f, m in HIP_MEMBERS.items()]
    lines += [f'O({CB_TYPE},{m},"{CB_TYPE}.{m}")' for m in ("kind", "operation", "phase", "payload")]
    lines += [f'printf("enum:{k} %d\\n", (int){k});' for k in ENUMS]
    lines += ["#ifdef HAVE_CB", f"S({SYMBOL_TYPE})"]
    lines += [f'O({SYMBOL_TYPE},{f},"{SYMBOL_TYPE}.{f}")' for f in L.KERNEL_SYMBOL.names]
    lines += ["#endif", "return 0;}"]
    got = _run_probe(cc, dirs, "\n".join(lines), tmp_path)
    for dt, ctype, members, _ in STRUCTS:
        assert {f: got[f"{ctype}.{f}"] for f in members} == {f: dt.fields[f][1] for f in members}, ctype
        assert got[f"sizeof:{ctype}"] >= dt.itemsize, ctype
    assert got["sizeof:rocprofiler_kernel_dispatch_info_t"] == L.KERNEL_DISPATCH_INFO_SIZE
    hip = L.HIP_API_V1 if got["sizeof:rocprofiler_correlation_id_t"] == 24 else L.HIP_API_V0
    assert got[f"sizeof:{HIP_TYPE}"] == hip.itemsize
    assert {f: got[f"{HIP_TYPE}.{f}"] for f in HIP_MEMBERS} == {f: hip.fields[f][1] for f in HIP_MEMBERS}
    layout = "v1" if got["sizeof:rocprofiler_correlation_id_t"] == 24 else "v0"
    assert got[f"sizeof:{CB_TYPE}"] == L.CALLBACK_RECORD_SIZES[layout]
    base = 32 if layout == "v0" else 40
    assert [got[f"{CB_TYPE}.{m}"] for m in ("kind", "operation", "phase", "payload")] == \
        [base, base + 4, base + 8, base + 16]
    assert got["sizeof:rocprofiler_tool_configure_result_t"] == ctypes.sizeof(api.ToolConfigureResult)
    assert got["sizeof:rocprofiler_client_id_t"] == ctypes.sizeof(api.ClientId)
    assert {k: got[f"enum:{k}"] for k in ENUMS} == ENUMS
    if f"sizeof:{SYMBOL_TYPE}" in got:
        assert {f: got[f"{SYMBOL_TYPE}.{f}"] for f in L.KERNEL_SYMBOL.names} == \
            {f: L.KERNEL_SYMBOL.fields[f][1] for f in L.KERNEL_SYMBOL.names}


def test_rocprof_fallback_operation_ids_match_the_header_enum():
    dirs = [d for d in os.environ.get("ROCPROFILER_SDK_INCLUDE", "").split(os.pathsep) if d]
    path = next((os.path.join(d, "rocprofiler-sdk", "hip", "runtime_api_id.h") for d in dirs
                 if os.path.exists(os.path.join(d, "rocprofiler-sdk", "hip", "runtime_api_id.h"))), None)
    if path is None:
        pytest.skip("set ROCPROFILER_SDK_INCLUDE to the rocprofiler-sdk header folder to read hip/runtime_api_id.h")
    ids, value = {}, -2
    for line in open(path):
        m = re.match(r"\s*ROCPROFILER_HIP_RUNTIME_API_ID_(\w+)\s*(?:=\s*(-?\d+))?\s*,", line)
        if m:
            value = int(m.group(2)) if m.group(2) is not None else value + 1
            ids[m.group(1)] = value
    assert {k: ids.get(k) for k in api.HIP_LAUNCH_OPERATION_IDS_0_5} == api.HIP_LAUNCH_OPERATION_IDS_0_5
