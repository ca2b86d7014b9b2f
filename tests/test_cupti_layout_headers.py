"""Record layouts and constants checked against the CUPTI headers in the triton wheel.

A small C program prints ``offsetof``/``sizeof`` (and enum values) compiled with the
system ``cc`` against ``triton/backends/nvidia/include/cupti*.h``.  Both the backend's
table (``cupti_layout``/``cupti_lib``/``cbids``) and the fake's own struct formats are compared
with it, independently.  Skipped, with the reason, where no compiler or headers exist.
"""
import importlib.util
import os
import shutil
import struct
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes import fake_cupti  # noqa: E402

from proton_ctypes.backends.nvidia import layout as L  # noqa: E402
from proton_ctypes.backends.nvidia import pcsampling_layout as PL  # noqa: E402
from proton_ctypes.backends.nvidia import cbids  # noqa: E402
from proton_ctypes.backends.nvidia import lib as cupti_lib  # noqa: E402

#: the driver's stream-capture callbacks, begin then end, by their names in cupti_driver_cbid.h
CAPTURE_CBID_NAMES = ("cuStreamBeginCapture", "cuStreamBeginCapture_ptsz", "cuStreamBeginCapture_v2",
                      "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCaptureToGraph",
                      "cuStreamBeginCaptureToGraph_ptsz", "cuStreamEndCapture", "cuStreamEndCapture_ptsz")
KERNEL_STRUCTS = ["CUpti_ActivityKernel5", "CUpti_ActivityKernel6", "CUpti_ActivityKernel7",
                  "CUpti_ActivityKernel8", "CUpti_ActivityKernel9"]



def _include_dir():
    spec = importlib.util.find_spec("triton")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "backends", "nvidia", "include")
        if os.path.exists(os.path.join(path, "cupti.h")):
            return path
    return None


def _program():
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <cupti.h>',
             '#define F(T, f) printf("F %s %s %zu %zu\\n", #T, #f, offsetof(T, f), sizeof(((T*)0)->f))',
             '#define S(T) printf("S %s %zu\\n", #T, sizeof(T))',
             '#define E(name) printf("E %s %d\\n", #name, (int)(name))',
             'int main(void) {']
    kernel_fields = sorted({name for name, _, _ in L.KERNEL_FIELDS} | set(fake_cupti.KERNEL_OFFSETS))
    for struct_name in KERNEL_STRUCTS:
        lines.append(f"S({struct_name});")
        for field in kernel_fields:
            if field == "graphId" and struct_name in KERNEL_STRUCTS[:3]:
                continue
            lines.append(f"F({struct_name}, {field});")
    lines.append("S(CUpti_ActivityKernel4);")
    for struct_name, fields in (("CUpti_ActivityAPI", L.API_FIELDS),
                                ("CUpti_ActivityExternalCorrelation", L.EXTCORR_FIELDS)):
        lines.append(f"S({struct_name});")
        lines += [f"F({struct_name}, {name});" for name, _, _ in fields]
    lines += ["S(CUpti_CallbackData);", "F(CUpti_CallbackData, callbackSite);",
              "F(CUpti_CallbackData, correlationId);", "S(CUpti_ResourceData);",
              "F(CUpti_ResourceData, resourceDescriptor);", "S(CUpti_GraphData);",
              "F(CUpti_GraphData, graph);", "F(CUpti_GraphData, node);", "F(CUpti_GraphData, originalNode);",
              "F(CUpti_GraphData, originalGraph);", "F(CUpti_GraphData, graphExec);",
              "F(CUpti_CallbackData, functionParams);", "F(CUpti_NvtxData, functionParams);",
              "F(CUpti_CallbackData, symbolName);", "F(CUpti_CallbackData, context);"]
    enums = ["CUPTI_API_VERSION", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_RUNTIME",
             "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION", "CUPTI_ERROR_MAX_LIMIT_REACHED",
             "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", "CUPTI_ACTIVITY_FLAG_FLUSH_FORCED",
             "CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM", "CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0",
             "CUPTI_CB_DOMAIN_DRIVER_API", "CUPTI_CB_DOMAIN_RUNTIME_API", "CUPTI_CB_DOMAIN_RESOURCE",
             "CUPTI_API_ENTER", "CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED", "CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED",
             "CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED", "CUPTI_CB_DOMAIN_NVTX", "CUPTI_CBID_NVTX_nvtxRangePushA",
             "CUPTI_CBID_NVTX_nvtxRangePop", "CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER",
             "CUPTI_ACTIVITY_KIND_KERNEL"]
    enums += [f"CUPTI_DRIVER_TRACE_CBID_{name}" for name in CAPTURE_CBID_NAMES]
    enums += [f"CUPTI_DRIVER_TRACE_CBID_{name}" for name in cbids.DRIVER_LAUNCH_CBIDS]
    enums += [f"CUPTI_RUNTIME_TRACE_CBID_{name}" for name in cbids.RUNTIME_LAUNCH_CBIDS]
    lines += [f"E({name});" for name in enums]
    lines += ["return 0;", "}"]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def header_facts(tmp_path_factory):
    """``{"S": {struct: size}, "F": {(struct, field): (offset, size)}, "E": {name: value}}`` from the headers."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc/gcc/clang) on this machine: cannot check layouts against the headers")
    include = _include_dir()
    if include is None:
        pytest.skip("no CUPTI headers (triton/backends/nvidia/include/cupti.h) on this machine")
    work = tmp_path_factory.mktemp("cupti_layout")
    source = work / "probe.c"
    source.write_text(_program())
    binary = work / "probe"
    build = subprocess.run([compiler, f"-I{include}", str(source), "-o", str(binary)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the CUPTI header probe did not compile: {build.stderr[-500:]}")
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    facts = {"S": {}, "F": {}, "E": {}}
    for line in out.splitlines():
        tag, *rest = line.split()
        if tag == "S":
            facts["S"][rest[0]] = int(rest[1])
        elif tag == "F":
            facts["F"][(rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        else:
            facts["E"][rest[0]] = int(rest[1])
    return facts


def test_backend_kernel_offsets_hold_for_kernel5_to_kernel9(header_facts):
    for struct_name in KERNEL_STRUCTS:
        for name, fmt, offset in L.KERNEL_FIELDS:
            if name == "graphId" and struct_name in KERNEL_STRUCTS[:3]:
                continue
            assert header_facts["F"][(struct_name, name)] == (offset, int(fmt[-1])), (struct_name, name)


def test_backend_struct_sizes_match(header_facts):
    sizes = header_facts["S"]
    for version, size in L.KERNEL_STRUCT_SIZES.items():
        assert sizes[f"CUpti_ActivityKernel{version}"] == size
    assert sizes["CUpti_ActivityAPI"] == L.API_RECORD_SIZE == L.API_DTYPE.itemsize
    assert sizes["CUpti_ActivityExternalCorrelation"] == L.EXTCORR_RECORD_SIZE
    assert L.expected_kernel_stride(header_facts["E"].get("CUPTI_API_VERSION", 26)) == sizes["CUpti_ActivityKernel9"]


def test_backend_api_and_extcorr_offsets_match(header_facts):
    for struct_name, fields in (("CUpti_ActivityAPI", L.API_FIELDS),
                                ("CUpti_ActivityExternalCorrelation", L.EXTCORR_FIELDS)):
        for name, fmt, offset in fields:
            assert header_facts["F"][(struct_name, name)] == (offset, int(fmt[-1])), (struct_name, name)


def test_backend_callback_struct_offsets_match(header_facts):
    f = header_facts["F"]
    assert f[("CUpti_CallbackData", "callbackSite")][0] == L.CALLBACK_SITE_OFFSET
    assert f[("CUpti_CallbackData", "correlationId")][0] == L.CALLBACK_CORRELATION_OFFSET
    assert f[("CUpti_ResourceData", "resourceDescriptor")][0] == L.RESOURCE_DESCRIPTOR_OFFSET
    assert f[("CUpti_GraphData", "graph")][0] == L.GRAPHDATA_GRAPH_OFFSET
    assert f[("CUpti_GraphData", "node")][0] == L.GRAPHDATA_NODE_OFFSET
    assert f[("CUpti_GraphData", "originalNode")][0] == L.GRAPHDATA_ORIGINAL_NODE_OFFSET
    assert f[("CUpti_GraphData", "originalGraph")][0] == L.GRAPHDATA_ORIGINAL_GRAPH_OFFSET
    assert f[("CUpti_GraphData", "graphExec")][0] == L.GRAPHDATA_GRAPH_EXEC_OFFSET
    assert f[("CUpti_CallbackData", "functionParams")][0] == L.CALLBACK_PARAMS_OFFSET
    assert f[("CUpti_NvtxData", "functionParams")][0] == L.NVTXDATA_PARAMS_OFFSET
    assert f[("CUpti_CallbackData", "symbolName")][0] == PL.CALLBACK_SYMBOL_OFFSET
    assert f[("CUpti_CallbackData", "context")][0] == PL.CALLBACK_CONTEXT_OFFSET


def test_backend_constants_match_the_enums(header_facts):
    e = header_facts["E"]
    assert e["CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"] == L.KIND_CONCURRENT_KERNEL
    assert e["CUPTI_ACTIVITY_KIND_DRIVER"] == L.KIND_DRIVER and e["CUPTI_ACTIVITY_KIND_RUNTIME"] == L.KIND_RUNTIME
    assert e["CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION"] == L.KIND_EXTERNAL_CORRELATION
    assert e["CUPTI_ERROR_MAX_LIMIT_REACHED"] == cupti_lib.ERROR_MAX_LIMIT_REACHED
    assert e["CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"] == cupti_lib.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
    assert e["CUPTI_ACTIVITY_FLAG_FLUSH_FORCED"] == cupti_lib.FLUSH_FORCED
    assert e["CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM"] == cupti_lib.THREAD_ID_TYPE_SYSTEM
    assert e["CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0"] == cupti_lib.EXTERNAL_CORRELATION_KIND_CUSTOM0
    assert e["CUPTI_CB_DOMAIN_DRIVER_API"] == cbids.CB_DOMAIN_DRIVER_API
    assert e["CUPTI_CB_DOMAIN_RESOURCE"] == cbids.CB_DOMAIN_RESOURCE
    assert e["CUPTI_API_ENTER"] == cbids.CB_SITE_ENTER
    assert e["CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED"] == cbids.RESOURCE_GRAPHNODE_CREATED
    assert e["CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED"] == cbids.RESOURCE_GRAPHNODE_CLONED
    assert e["CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED"] == cbids.RESOURCE_GRAPHEXEC_CREATED
    assert e["CUPTI_CB_DOMAIN_NVTX"] == cbids.CB_DOMAIN_NVTX
    assert (e["CUPTI_CBID_NVTX_nvtxRangePushA"], e["CUPTI_CBID_NVTX_nvtxRangePop"]) == cbids.NVTX_CBIDS
    assert e["CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER"] == cupti_lib.ATTR_PER_THREAD_ACTIVITY_BUFFER
    assert e["CUPTI_ACTIVITY_KIND_KERNEL"] == L.KIND_KERNEL
    assert tuple(e[f"CUPTI_DRIVER_TRACE_CBID_{name}"] for name in CAPTURE_CBID_NAMES) == \
        cbids.DRIVER_CAPTURE_BEGIN_CBIDS + cbids.DRIVER_CAPTURE_END_CBIDS
    for name, cbid in cbids.DRIVER_LAUNCH_CBIDS.items():
        assert e[f"CUPTI_DRIVER_TRACE_CBID_{name}"] == cbid, name
    for name, cbid in cbids.RUNTIME_LAUNCH_CBIDS.items():
        assert e[f"CUPTI_RUNTIME_TRACE_CBID_{name}"] == cbid, name


def test_fake_struct_formats_match_the_headers(header_facts):
    f, s = header_facts["F"], header_facts["S"]
    for name, offset in fake_cupti.KERNEL_OFFSETS.items():
        assert f[("CUpti_ActivityKernel9", name)][0] == offset, name
    packed_kernel_fields = struct.calcsize(fake_cupti.KERNEL_FORMAT.format)
    assert packed_kernel_fields == f[("CUpti_ActivityKernel9", "graphId")][0] + 4
    assert fake_cupti.API_FORMAT.size == s["CUpti_ActivityAPI"]
    assert fake_cupti.EXTCORR_FORMAT.size == s["CUpti_ActivityExternalCorrelation"]
    assert fake_cupti.CALLBACK_DATA_FORMAT.size == s["CUpti_CallbackData"]
    assert fake_cupti.RESOURCE_DATA_FORMAT.size == s["CUpti_ResourceData"]
    assert fake_cupti.GRAPH_DATA_FORMAT.size == s["CUpti_GraphData"]
