"""The PC Sampling API on top of the fake libcupti (CPU tests of ``mode="pcsampling"``).

:class:`FakeCuptiPC` adds the ``cuptiPCSampling*`` / ``cuptiGetSassToSourceCorrelation``
/ ``cuptiGetCubinCrc`` functions to :class:`~fakes.fake_cupti.FakeCupti`.  It reads the
caller's params structs and writes PC records into the caller's buffers through
``struct`` formats written here from ``offsetof`` on the CUPTI 12.8 headers (it never
imports the backend's ``cupti_pcsampling_layout``), and rejects a params struct whose
``size`` is not the header's ``CUpti_*ParamsSize``.

Test-side driving: :meth:`FakeCuptiPC.load_module` (fires ``MODULE_LOADED``),
:meth:`FakeCuptiPC.launch_sampled` (a launch whose sampling range yields given PCs),
:meth:`FakeCuptiPC.launch_queued` (a kernel that runs only at the next device synchronization,
sampled only if a range is open then),
:attr:`lines` (``(function, pc offset) -> (dir, file, line)``).  Recorded:
:attr:`config` (attribute type -> value), :attr:`pc_calls` (``(function, ctx)`` in order).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import struct
import zlib

from fakes.fake_cupti import CALLBACK_DATA_FORMAT, DOMAIN_RESOURCE, FakeCupti

# ------------------------------------------------------------------ layouts (offsetof, CUPTI 12.8)
PARAMS_SIZES = {   # CUpti_*ParamsSize macros
    "cuptiPCSamplingSetConfigurationAttribute": 40, "cuptiPCSamplingGetData": 32,
    "cuptiPCSamplingEnable": 24, "cuptiPCSamplingDisable": 24, "cuptiPCSamplingStart": 24,
    "cuptiPCSamplingStop": 24, "cuptiPCSamplingGetNumStallReasons": 32,
    "cuptiPCSamplingGetStallReasons": 48, "cuptiGetSassToSourceCorrelation": 64, "cuptiGetCubinCrc": 32,
}
CONTEXT_PARAMS = struct.Struct("<QQQ")                      # size pPriv ctx
CONFIG_PARAMS = struct.Struct("<QQQQQ")                     # size pPriv ctx numAttributes pInfo
CONFIG_INFO = struct.Struct("<ii24s")                       # attributeType attributeStatus attributeData
GETDATA_PARAMS = struct.Struct("<QQQQ")                     # size pPriv ctx pcSamplingData
NUM_STALL_PARAMS = struct.Struct("<QQQQ")                   # size pPriv ctx numStallReasons*
STALL_PARAMS = struct.Struct("<QQQQQQ")                     # size pPriv ctx num index* names**
SASS_PARAMS = struct.Struct("<QQQQI4xQQQ")                  # size cubin fn cubinSize line pcOffset file dir
CRC_PARAMS = struct.Struct("<QQQQ")                         # size cubinSize cubin crc
PC_DATA = struct.Struct("<QQQII QQQ I4x")                   # CUpti_PCSamplingPCData, 64 bytes
SAMPLING_DATA_HEAD = struct.Struct("<QQQQQQQQQB7x")         # CUpti_PCSamplingData, 80 bytes
MODULE_DATA = struct.Struct("<I4xQQ")                       # moduleId, cubinSize, pCubin

STALL_REASONS = (   # (index, CUPTI name) as an H100/H200 reports a subset of them
    (1, "smsp__pcsamp_warps_issue_stalled_barrier"),
    (2, "smsp__pcsamp_warps_issue_stalled_barrier_not_issued"),
    (3, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
    (4, "smsp__pcsamp_warps_issue_stalled_not_selected"),
    (5, "smsp__pcsamp_warps_issue_stalled_selected"),
    (6, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"),
    (7, "smsp__pcsamp_warps_issue_stalled_gmma"),
)
CONTEXT = 0xC7C7_0000
_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]


def _addr(arg):
    obj = getattr(arg, "_obj", arg)
    return ctypes.addressof(obj) if not isinstance(obj, int) else obj


def _read(fmt, arg):
    return fmt.unpack(ctypes.string_at(_addr(arg), fmt.size))


def _cstring(text: str) -> int:
    raw = text.encode() + b"\0"
    p = _libc.malloc(len(raw))
    ctypes.memmove(p, raw, len(raw))
    return p


class FakeCuptiPC(FakeCupti):
    """FakeCupti with the PC Sampling API (see the module docstring)."""

    def __init__(self, *args, stall_reasons=STALL_REASONS, **kwargs):
        super().__init__(*args, **kwargs)
        self.stall_reasons = tuple(stall_reasons)
        self.config = {}
        self.pc_calls = []
        self.lines = {}
        self.enabled = set()
        self.running = False
        self._data_buffer = None
        self._pending = []
        #: PCs of launched kernels that have not run yet (:meth:`launch_queued`)
        self._unrun = []
        self._to_queue = []
        self._cubins = []
        self._function_ids = {}

    # ================================================================== C API
    def _pc_enter(self, name, arg, size_at=0):
        code = self._enter(name)
        if code:
            return code
        size = ctypes.c_size_t.from_address(_addr(arg) + size_at).value
        return 0 if size == PARAMS_SIZES[name] else 1   # CUPTI_ERROR_INVALID_PARAMETER

    def _ctx_call(self, name, arg):
        """Check the params; returns ``(result code, ctx)``."""
        code = self._pc_enter(name, arg)
        ctx = _read(CONTEXT_PARAMS, arg)[2]
        if not code:
            self.pc_calls.append((name, ctx))
            if not ctx:
                code = 1
        return code, ctx

    def cuptiPCSamplingEnable(self, arg):
        code, ctx = self._ctx_call("cuptiPCSamplingEnable", arg)
        if not code:
            self.enabled.add(ctx)
        return code

    def cuptiPCSamplingDisable(self, arg):
        code, ctx = self._ctx_call("cuptiPCSamplingDisable", arg)
        self.enabled.discard(ctx)
        return code

    def cuptiPCSamplingStart(self, arg):
        code, ctx = self._ctx_call("cuptiPCSamplingStart", arg)
        if code:
            return code
        if self.config.get(6) != 1 or ctx not in self.enabled:
            return 3   # CUPTI_ERROR_INVALID_OPERATION
        self.running = True
        return 0

    def cuptiPCSamplingStop(self, arg):
        code, ctx = self._ctx_call("cuptiPCSamplingStop", arg)
        if code:
            return code
        self.running = False
        self._fill()            # CUPTI copies the range's PCs into the configured buffer
        return 0

    def cuptiPCSamplingGetData(self, arg):
        code = self._pc_enter("cuptiPCSamplingGetData", arg)
        if code:
            return code
        _s, _p, ctx, buf = _read(GETDATA_PARAMS, arg)
        self.pc_calls.append(("cuptiPCSamplingGetData", ctx))
        if buf != self._data_buffer:
            return 1
        self._fill()
        return 0

    def cuptiPCSamplingGetNumStallReasons(self, arg):
        code = self._pc_enter("cuptiPCSamplingGetNumStallReasons", arg)
        if code:
            return code
        out = _read(NUM_STALL_PARAMS, arg)[3]
        ctypes.c_size_t.from_address(out).value = len(self.stall_reasons)
        return 0

    def cuptiPCSamplingGetStallReasons(self, arg):
        code = self._pc_enter("cuptiPCSamplingGetStallReasons", arg)
        if code:
            return code
        _s, _p, _ctx, n, indices, names = _read(STALL_PARAMS, arg)
        for i, (index, name) in enumerate(self.stall_reasons[:n]):
            ctypes.c_uint32.from_address(indices + 4 * i).value = index
            dest = ctypes.c_void_p.from_address(names + 8 * i).value
            raw = name.encode()[:127] + b"\0"
            ctypes.memmove(dest, raw, len(raw))
        return 0

    def cuptiPCSamplingSetConfigurationAttribute(self, arg):
        code = self._pc_enter("cuptiPCSamplingSetConfigurationAttribute", arg)
        if code:
            return code
        _s, _p, ctx, n, infos = _read(CONFIG_PARAMS, arg)
        for i in range(n):
            kind, _status, data = CONFIG_INFO.unpack(ctypes.string_at(infos + 32 * i, 32))
            if kind == 2:       # STALL_REASON: count, uint32 *indices
                count, ptr = struct.unpack_from("<QQ", data)
                self.config[2] = [ctypes.c_uint32.from_address(ptr + 4 * j).value for j in range(count)]
            elif kind in (1, 5, 6):     # u32 / enum values
                self.config[kind] = struct.unpack_from("<I", data)[0]
            else:                       # size_t / pointer values
                self.config[kind] = struct.unpack_from("<Q", data)[0]
        self._data_buffer = self.config.get(8)
        return 0

    def cuptiGetCubinCrc(self, arg):
        code = self._pc_enter("cuptiGetCubinCrc", arg)
        if code:
            return code
        _s, size, cubin, _crc = _read(CRC_PARAMS, arg)
        if not cubin or not size:
            return 1
        crc = zlib.crc32(ctypes.string_at(cubin, size))
        ctypes.c_uint64.from_address(_addr(arg) + 24).value = crc
        return 0

    def cuptiGetSassToSourceCorrelation(self, arg):
        code = self._pc_enter("cuptiGetSassToSourceCorrelation", arg)
        if code:
            return code
        _s, cubin, fn, size, _line, pc_offset, _f, _d = _read(SASS_PARAMS, arg)
        if not cubin or not fn or not size:
            return 1
        hit = self.lines.get((ctypes.string_at(fn).decode(), pc_offset))
        if hit is None:
            return 999
        dir_name, file_name, line = hit
        base = _addr(arg)
        ctypes.c_uint32.from_address(base + 32).value = line
        ctypes.c_void_p.from_address(base + 48).value = _cstring(file_name)
        ctypes.c_void_p.from_address(base + 56).value = _cstring(dir_name)
        return 0

    # ================================================================== test-side driving
    def load_module(self, cubin: bytes = b"\x7fELF fake cubin") -> int:
        """Load a module: fire MODULE_LOADED with the cubin; returns its CRC."""
        buf = ctypes.create_string_buffer(cubin, len(cubin))
        self._cubins.append(buf)
        module = ctypes.create_string_buffer(MODULE_DATA.pack(1, len(cubin), ctypes.addressof(buf)), 24)
        self._keep.append(module)
        if self.subscriber is not None and (DOMAIN_RESOURCE, 6) in self.enabled_callbacks:
            resource = ctypes.create_string_buffer(struct.pack("<QQQ", CONTEXT, 0, ctypes.addressof(module)), 24)
            self.subscriber(None, DOMAIN_RESOURCE, 6, ctypes.addressof(resource))
        return zlib.crc32(cubin)

    def launch_sampled(self, name, pcs, crc=0, **kwargs):
        """A launch whose sampling range yields ``pcs``: ``[(pc offset, [(stall index, samples)])]``."""
        self._pending = [(crc, off, name, reasons) for off, reasons in pcs]
        return self.launch(name, **kwargs)

    def launch_with_late_samples(self, name, late, pcs=(), crc=0, **kwargs):
        """A launch whose sampling range also yields samples of an earlier kernel ``late``
        (``[(function name, pc offset, [(stall index, samples)])]``): a kernel still running when
        its own range was stopped, sampled in the next one."""
        self._pending = ([(crc, off, fn, reasons) for fn, off, reasons in late]
                         + [(crc, off, name, reasons) for off, reasons in pcs])
        return self.launch(name, **kwargs)

    def launch_queued(self, name, pcs, crc=0, **kwargs):
        """A launch whose kernel runs only at the next device synchronization (a tiny torch fill
        behind the launch call's return): its ``pcs`` are sampled only if a range is open then."""
        self._to_queue = [(crc, off, name, reasons) for off, reasons in pcs]
        try:
            return self.launch(name, **kwargs)
        finally:
            self._queue_launched()

    def _queue_launched(self):
        """The kernel of the launch in progress is in the queue from now on (after its API ENTER)."""
        self._unrun += self._to_queue
        self._to_queue = []

    def complete_kernels(self):
        """The device synchronizes: queued kernels run now, sampled while a range is open."""
        unrun, self._unrun = self._unrun, []
        if self.running:
            self._pending += unrun
        super().complete_kernels()

    def launch(self, name="tiny", **kwargs):
        """A launch whose callbacks name the kernel (``CUpti_CallbackData.symbolName``)."""
        self._launching = name
        try:
            return super().launch(name, **kwargs)
        finally:
            self._launching = None

    # ================================================================== internals
    def _fill(self):
        """Write the next chunk of pending PCs into the configured CUpti_PCSamplingData."""
        head = SAMPLING_DATA_HEAD.unpack(ctypes.string_at(self._data_buffer, SAMPLING_DATA_HEAD.size))
        collect, pcs_at = head[1], head[7]
        take, self._pending = self._pending[:collect], self._pending[collect:]
        width = len(self.config.get(2, ()))
        for i, (crc, off, name, reasons) in enumerate(take):
            at = pcs_at + PC_DATA.size * i
            reasons_at = ctypes.c_void_p.from_address(at + 48).value
            struct.pack_into("<QQQII", (ctypes.c_char * 32).from_address(at), 0, 0, crc, off,
                             self._function_index(name), 0)
            ctypes.c_void_p.from_address(at + 32).value = self._name_pointer(name)
            ctypes.c_size_t.from_address(at + 40).value = min(len(reasons), width)
            for j, (index, samples) in enumerate(reasons[:width]):
                struct.pack_into("<II", (ctypes.c_char * 8).from_address(reasons_at + 8 * j), 0, index, samples)
        total = sum(s for _c, _o, _n, r in take for _i, s in r)
        ctypes.c_size_t.from_address(self._data_buffer + 32).value = len(take)
        ctypes.c_size_t.from_address(self._data_buffer + 40).value = len(self._pending)
        ctypes.c_uint64.from_address(self._data_buffer + 16).value = total

    def _function_index(self, name):
        return self._function_ids.setdefault(name, len(self._function_ids))

    def _callback(self, domain, cbid, site, corr):
        """Launch callbacks carry a context (CUpti_CallbackData.context at 40) and the kernel's
        name (``symbolName`` at 32)."""
        if self.subscriber is None or (domain, cbid) not in self.enabled_callbacks:
            return
        symbol = self._name_pointer(self._launching) if getattr(self, "_launching", None) else 0
        data = ctypes.create_string_buffer(CALLBACK_DATA_FORMAT.pack(site, 0, 0, 0, symbol, CONTEXT, 1, 0, corr), 72)
        self.subscriber(None, domain, cbid, ctypes.addressof(data))
        if site == 0:                  # API ENTER: the launch's kernel is queued once it returns
            self._queue_launched()
