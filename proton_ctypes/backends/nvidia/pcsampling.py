"""``mode="pcsampling"`` on the CUPTI backend: CUPTI's PC Sampling API, driven per launch.

What Proton's ``CuptiPCSampling`` does, and so what this does:

* resource callbacks: ``MODULE_LOADED`` keeps each cubin (pointer, size) by its
  ``cuptiGetCubinCrc``; ``MODULE_UNLOAD_STARTING`` forgets it; ``CONTEXT_CREATED``
  configures the context; ``CONTEXT_DESTROY_STARTING`` disables sampling there;
* a context is configured once: ``cuptiPCSamplingEnable``, the stall reasons whose CUPTI
  name contains one of Proton's metric names (:data:`METRIC_NAMES`; first match wins, so
  e.g. ``..._not_selected`` matches nothing because Proton spells it ``not_Selected``),
  the sampling period (``2**E`` cycles, E from the mode's interval), a 128 MiB hardware
  buffer, a 16 MiB scratch buffer, a 1024-PC data buffer, start/stop control on and the
  continuous collection mode, all in one ``cuptiPCSamplingSetConfigurationAttribute``;
* driver launch API ENTER: synchronise the context, ``cuptiPCSamplingStart``;
* driver launch API EXIT: synchronise the context (unlike Proton: see below),
  ``cuptiPCSamplingStop``, then read the data buffer and call
  ``cuptiPCSamplingGetData`` until no PC remains; each PC is resolved once to its source
  line (``cuptiGetSassToSourceCorrelation``) and its stall-reason samples are added at
  ``<kernel node>/<dir>/<file>:<line>@<function>`` (at the kernel node itself when the
  cubin has no line info) as the 20 values of Proton's ``PCSamplingMetric``:
  ``num_samples`` (+samples), ``num_stalled_samples`` and the reason's own value
  (+samples, or +0 for a ``*_not_issued`` reason).

The kernel node is the node the kernel's activity record lands on: the launch op itself
under ``hook="triton"``, else ``<context at launch>/<function name>``.

A range is stopped once the device has run its kernel: the launch call returns before a short
kernel starts, and a range stopped then samples nothing of it.  Proton stops at the return and
counts on ``KIND_KERNEL`` tracing to have serialized the launch.  The synchronisation costs
nothing extra: the next range's start synchronises anyway.  A kernel this short still gets a
sample only by chance at the default period (measured: none in about half of fresh sessions,
for Proton as for us; ``docs/collection.md``).  Samples of another function that still come
with a range (a kernel of a thread not sampled) go to the node of that function's latest sampled launch
(:mod:`proton_ctypes.core.pc_samples`), the kernel they were taken in.
"""
from __future__ import annotations

import ctypes
import math
import threading
import warnings

import numpy as np

from ..._libc import libc
from . import pcsampling_layout as L
from .cbids import CB_DOMAIN_DRIVER_API, CB_DOMAIN_RESOURCE, DRIVER_LAUNCH_CBIDS
from .lib import CuptiError, CuptiLib

#: ``PCSamplingMetric``'s value names, in Proton's order (``stalled_not_Selected`` sic).
METRIC_NAMES = (
    "num_samples", "num_stalled_samples", "stalled_branch_resolving", "stalled_no_instruction",
    "stalled_short_scoreboard", "stalled_wait", "stalled_long_scoreboard", "stalled_tex_throttle",
    "stalled_barrier", "stalled_membar", "stalled_imc_miss", "stalled_mio_throttle",
    "stalled_math_pipe_throttle", "stalled_drain", "stalled_lg_throttle", "stalled_not_Selected",
    "stalled_misc", "stalled_dispatch_stall", "stalled_sleeping", "stalled_selected")
NUM_SAMPLES, NUM_STALLED = 0, 1
HARDWARE_BUFFER_SIZE = 128 * 1024 * 1024
SCRATCH_BUFFER_SIZE = 16 * 1024 * 1024
DATA_BUFFER_PC_COUNT = 1024
#: CUPTI's valid ``samplingPeriod`` exponents (the period is ``2**E`` cycles)
MIN_SAMPLING_PERIOD, MAX_SAMPLING_PERIOD = 5, 31
RESOURCE_CBIDS = (L.RESOURCE_CONTEXT_CREATED, L.RESOURCE_CONTEXT_DESTROY_STARTING,
                  L.RESOURCE_MODULE_LOADED, L.RESOURCE_MODULE_UNLOAD_STARTING)



def pc_sampling_period(interval: int) -> int:
    """CUPTI's ``samplingPeriod`` for ``interval`` cycles: the exponent E of ``2**E`` nearest to
    it, clamped to CUPTI's valid 5..31.  The default interval 1000 gives 10, the exponent
    Proton's CUPTI backend always configures (``ConfigureData::DefaultFrequency``)."""
    return int(min(MAX_SAMPLING_PERIOD, max(MIN_SAMPLING_PERIOD, round(math.log2(interval)))))


def match_stall_reasons(names, indices):
    """Proton's ``matchStallReasonsToIndices``: ``(valid indices, index -> metric id, not-issued set)``."""
    valid, to_metric, not_issued = [], {}, set()
    for name, index in zip(names, indices):
        for j, metric in enumerate(METRIC_NAMES):
            if metric in name:
                to_metric[int(index)] = j
                if "not_issued" in name:
                    not_issued.add(int(index))
                valid.append(int(index))
                break
    return valid, to_metric, not_issued


class ContextConfig:
    """One configured context: its stall reasons and the buffers CUPTI writes into (kept alive)."""

    def __init__(self, lib: CuptiLib, ctx: int, sampling_period: int, pcdata_struct):
        self.ctx = ctx
        self.names, self.indices = self._stall_reasons(lib, ctx)
        valid, self.to_metric, self.not_issued = match_stall_reasons(self.names, self.indices)
        self.num_valid = len(valid)
        self.valid = (L.U32 * max(1, len(valid)))(*valid)
        self.metric_lut = np.full(max(self.to_metric, default=0) + 1, -1, np.int64)
        self.not_issued_lut = np.zeros(len(self.metric_lut), bool)
        for index, metric in self.to_metric.items():
            self.metric_lut[index] = metric
            self.not_issued_lut[index] = index in self.not_issued
        n = DATA_BUFFER_PC_COUNT
        self.pc_stride = ctypes.sizeof(pcdata_struct)
        self.pcs = (pcdata_struct * n)()
        self.reasons = (L.StallReason * (n * max(1, self.num_valid)))()
        base, step = ctypes.addressof(self.reasons), ctypes.sizeof(L.StallReason) * max(1, self.num_valid)
        for i in range(n):
            self.pcs[i].stallReason = base + i * step
        self.data = L.PCSamplingData(size=ctypes.sizeof(L.PCSamplingData), collectNumPcs=n,
                                     pPcData=ctypes.addressof(self.pcs))
        values = ((L.ATTR_STALL_REASON, None), (L.ATTR_SAMPLING_PERIOD, ("samplingPeriod", sampling_period)),
                  (L.ATTR_HARDWARE_BUFFER_SIZE, ("hardwareBufferSize", HARDWARE_BUFFER_SIZE)),
                  (L.ATTR_SCRATCH_BUFFER_SIZE, ("scratchBufferSize", SCRATCH_BUFFER_SIZE)),
                  (L.ATTR_SAMPLING_DATA_BUFFER, ("samplingDataBuffer", ctypes.addressof(self.data))),
                  (L.ATTR_ENABLE_START_STOP_CONTROL, ("enableStartStopControl", 1)),
                  (L.ATTR_COLLECTION_MODE, ("collectionMode", L.COLLECTION_MODE_CONTINUOUS)))
        infos = (L.ConfigurationInfo * len(values))()
        for info, (kind, field) in zip(infos, values):
            info.attributeType = kind
            if field is None:
                info.attributeData.stallReasonData.stallReasonCount = self.num_valid
                info.attributeData.stallReasonData.pStallReasonIndex = ctypes.addressof(self.valid)
            else:
                setattr(info.attributeData, *field)
        self.infos = infos
        params = L.make_params(L.ConfigurationInfoParams, ctx=ctx, numAttributes=len(infos),
                               pPCSamplingConfigurationInfo=ctypes.addressof(infos))
        lib.pc_sampling_configure(params)

    @staticmethod
    def _stall_reasons(lib: CuptiLib, ctx: int):
        count = ctypes.c_size_t()
        p = L.make_params(L.GetNumStallReasonsParams, ctx=ctx, numStallReasons=ctypes.addressof(count))
        lib.pc_sampling_num_stall_reasons(p)
        n = int(count.value)
        bufs = [ctypes.create_string_buffer(L.STALL_REASON_STRING_SIZE) for _ in range(n)]
        names = (ctypes.c_void_p * max(1, n))(*[ctypes.addressof(b) for b in bufs])
        indices = (L.U32 * max(1, n))()
        p = L.make_params(L.GetStallReasonsParams, ctx=ctx, numStallReasons=n,
                          stallReasonIndex=ctypes.addressof(indices), stallReasons=ctypes.addressof(names))
        lib.pc_sampling_stall_reasons(p)
        return [b.value.decode(errors="replace") for b in bufs], [int(indices[i]) for i in range(n)]

    def pc_records(self):
        """The PCs now in the data buffer: a structured array and their ``(n, num_valid, 2)`` reasons."""
        n = min(int(self.data.totalNumPcs), DATA_BUFFER_PC_COUNT)
        dtype = np.dtype({"names": ["cubinCrc", "pcOffset", "functionIndex", "functionName", "stallReasonCount"],
                          "formats": ["<u8", "<u8", "<u4", "<u8", "<u8"],
                          "offsets": [8, 16, 24, 32, 40], "itemsize": self.pc_stride})
        recs = np.frombuffer(self.pcs, dtype=dtype, count=n)
        width = max(1, self.num_valid)
        reasons = np.frombuffer(self.reasons, dtype="<u4").reshape(-1, width, 2)[:n]
        return recs, reasons


class PCSampler:
    """PC sampling for one CUPTI backend (see the module docstring)."""

    def __init__(self, lib: CuptiLib, sampling_period: int, sync, on_samples):
        """``sync()`` synchronises the current context; ``on_samples(groups, symbol)`` receives,
        on the launching thread at the end of every sampled launch, the range's samples
        ``{(function name, frame or None): int64[20]}`` and the launched kernel's name (the
        callback's ``symbolName``, None when CUPTI gives none)."""
        self.lib = lib
        self.sampling_period = int(sampling_period)
        self.sync = sync
        self.on_samples = on_samples
        self.pcdata_struct = L.pcdata_struct(lib.version)
        self.contexts = {}
        #: cubin crc -> [cubin pointer, size, load count, {(function index, pc offset): frame}]
        self.cubins = {}
        self.started = False
        self.errors = []
        self.active = lambda: True
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ callbacks
    def enable_callbacks(self, hub) -> None:
        """Turn on the resource and driver launch callbacks this mode needs."""
        for cbid in RESOURCE_CBIDS:
            self.lib.enable_callback(hub.subscriber, CB_DOMAIN_RESOURCE, cbid)
        hub.enable_launch_callbacks()

    def disable_callbacks(self, hub) -> None:
        """Switch the resource callbacks off again (errors ignored: teardown)."""
        for cbid in RESOURCE_CBIDS:
            self.lib.disable_callback(hub.subscriber, CB_DOMAIN_RESOURCE, cbid)

    def on_callback(self, domain, cbid, data) -> None:
        """CUPTI callback entry: never raises into C; CUPTI errors become one RuntimeWarning each."""
        try:
            if domain == CB_DOMAIN_DRIVER_API:
                if cbid not in _LAUNCH:
                    return
                ctx = ctypes.c_void_p.from_address(data + L.CALLBACK_CONTEXT_OFFSET).value or 0
                if ctypes.c_int.from_address(data + L.CALLBACK_SITE_OFFSET).value == L.CB_SITE_ENTER:
                    if self.active():
                        self.start(ctx)
                elif self.started:
                    groups = self.stop(ctx)
                    symbol = ctypes.c_void_p.from_address(data + L.CALLBACK_SYMBOL_OFFSET).value
                    self.on_samples(groups, ctypes.string_at(symbol).decode(errors="replace") if symbol else None)
            elif domain == CB_DOMAIN_RESOURCE:
                self.on_resource(cbid, data)
        except Exception as e:
            self.errors.append(e)
            if len(self.errors) == 1:
                warnings.warn(f"proton_ctypes: PC sampling failed: {e}", RuntimeWarning, stacklevel=1)

    def on_resource(self, cbid, data) -> None:
        """Module load/unload and context create/destroy (CUpti_ResourceData at ``data``)."""
        ctx = ctypes.c_void_p.from_address(data + L.RESOURCE_CONTEXT_OFFSET).value or 0
        if cbid in (L.RESOURCE_MODULE_LOADED, L.RESOURCE_MODULE_UNLOAD_STARTING):
            desc = ctypes.c_void_p.from_address(data + L.RESOURCE_DESCRIPTOR_OFFSET).value
            if not desc:
                return
            size = ctypes.c_size_t.from_address(desc + L.MODULE_CUBIN_SIZE_OFFSET).value
            cubin = ctypes.c_void_p.from_address(desc + L.MODULE_CUBIN_OFFSET).value
            if cbid == L.RESOURCE_MODULE_LOADED:
                self.load_module(cubin, size)
            else:
                self.unload_module(cubin, size)
        elif cbid == L.RESOURCE_CONTEXT_CREATED:
            self.initialize(ctx)
        elif cbid == L.RESOURCE_CONTEXT_DESTROY_STARTING:
            self.finalize(ctx)

    # ------------------------------------------------------------------ modules
    def cubin_crc(self, cubin: int, size: int) -> int:
        """``cuptiGetCubinCrc`` of the cubin at ``cubin`` (``size`` bytes)."""
        p = L.make_params(L.CubinCrcParams, cubinSize=size, cubin=cubin)
        self.lib.cubin_crc(p)
        return int(p.cubinCrc)

    def load_module(self, cubin: int, size: int) -> None:
        """Remember a loaded cubin (by CRC) for source correlation."""
        crc = self.cubin_crc(cubin, size)
        with self._lock:
            entry = self.cubins.get(crc)
            if entry is None or entry[0] is None:
                self.cubins[crc] = [cubin, size, 1, {}]
            else:
                entry[0], entry[1] = cubin, size
                entry[2] += 1

    def unload_module(self, cubin: int, size: int) -> None:
        """Forget one load of a cubin (the entry goes with its last load)."""
        crc = self.cubin_crc(cubin, size)
        with self._lock:
            entry = self.cubins.get(crc)
            if entry is not None and entry[2] > 1:
                entry[2] -= 1
            else:
                self.cubins.pop(crc, None)

    def line_frame(self, crc: int, function_index: int, pc_offset: int, function_ptr: int):
        """``"<dir>/<file>:<line>@<function>"`` of one PC, or None without line info (cached)."""
        entry = self.cubins.get(crc)
        if entry is None:
            entry = self.cubins[crc] = [None, 0, 0, {}]
        key = (function_index, pc_offset)
        hit = entry[3].get(key, False)
        if hit is not False:
            return hit
        function = ctypes.string_at(function_ptr).decode(errors="replace") if function_ptr else ""
        p = L.make_params(L.SassToSourceParams, cubin=entry[0], functionName=function_ptr,
                          cubinSize=entry[1], pcOffset=pc_offset)
        self.lib.sass_to_source(p)  # False without line info: fileName stays NULL
        file_name = ctypes.string_at(p.fileName).decode(errors="replace") if p.fileName else ""
        dir_name = ctypes.string_at(p.dirName).decode(errors="replace") if p.dirName else ""
        for ptr in (p.fileName, p.dirName):
            if ptr:
                libc().free(ptr)    # CUPTI allocated the names with malloc
        frame = f"{dir_name}/{file_name}:{int(p.lineNumber)}@{function}" if file_name else None
        entry[3][key] = frame
        return frame

    # ------------------------------------------------------------------ contexts and ranges
    @staticmethod
    def _context(ctx: int):
        return L.make_params(L.ContextParams, ctx=ctx)

    def initialize(self, ctx: int) -> ContextConfig:
        """Enable and configure PC sampling on ``ctx`` once (raises :class:`CuptiError`)."""
        with self._lock:
            cfg = self.contexts.get(ctx)
            if cfg is None:
                self.lib.pc_sampling_enable(self._context(ctx))
                cfg = self.contexts[ctx] = ContextConfig(self.lib, ctx, self.sampling_period, self.pcdata_struct)
            return cfg

    def start(self, ctx: int) -> None:
        """Open a sampling range on ``ctx`` (after synchronising it), unless one is open."""
        with self._lock:
            if self.started:
                return
            self.initialize(ctx)
            self.sync()
            self.lib.pc_sampling_start(self._context(ctx))
            self.started = True

    def stop(self, ctx: int) -> dict:
        """Close the open range once the device has run what it launched (module docstring) and
        return its samples ``{(function, frame): int64[20]}``."""
        with self._lock:
            if not self.started:
                return {}
            cfg = self.contexts.get(ctx)
            try:
                self.sync()
            finally:
                self.started = False
                self.lib.pc_sampling_stop(self._context(ctx))
            return self.collect(cfg) if cfg is not None else {}

    def collect(self, cfg: ContextConfig) -> dict:
        """Proton's ``processPCSamplingData`` loop: the buffer, then ``GetData`` until nothing remains."""
        groups = {}
        data = cfg.data
        first = True
        while data.totalNumPcs > 0 or data.remainingNumPcs > 0 or first:
            self._add_buffer(cfg, groups)
            if data.remainingNumPcs > 0 or first:
                p = L.make_params(L.GetDataParams, ctx=cfg.ctx, pcSamplingData=ctypes.addressof(data))
                self.lib.pc_sampling_get_data(p)
                first = False
            else:
                break
        return groups

    def _add_buffer(self, cfg: ContextConfig, groups: dict) -> None:
        recs, reasons = cfg.pc_records()
        if not len(recs):
            return
        width = reasons.shape[1]
        mask = np.arange(width)[None, :] < np.minimum(recs["stallReasonCount"], cfg.num_valid)[:, None]
        rows = np.nonzero(mask)[0]
        index = reasons[..., 0][mask].astype(np.int64)
        samples = reasons[..., 1][mask].astype(np.int64)
        known = (index < len(cfg.metric_lut))
        known[known] = cfg.metric_lut[index[known]] >= 0
        if not known.all():
            raise RuntimeError("[PROTON] Invalid stall reason index")
        metric = cfg.metric_lut[index]
        stalled = np.where(cfg.not_issued_lut[index], 0, samples)
        gid = np.empty(len(recs), np.int64)
        keys = []
        lookup = {}
        names = {}
        for i, (crc, off, fidx, fptr) in enumerate(zip(recs["cubinCrc"].tolist(), recs["pcOffset"].tolist(),
                                                       recs["functionIndex"].tolist(), recs["functionName"].tolist())):
            fn = names.get(fptr)
            if fn is None:
                fn = names[fptr] = ctypes.string_at(fptr).decode(errors="replace") if fptr else ""
            key = (fn, self.line_frame(crc, fidx, off, fptr))
            g = lookup.get(key)
            if g is None:
                g = lookup[key] = len(keys)
                keys.append(key)
            gid[i] = g
        acc = np.zeros((len(keys), len(METRIC_NAMES)), np.int64)
        r = gid[rows]
        np.add.at(acc, (r, np.full(len(r), NUM_SAMPLES)), samples)
        np.add.at(acc, (r, np.full(len(r), NUM_STALLED)), stalled)
        np.add.at(acc, (r, metric), stalled)
        for g, key in enumerate(keys):
            cur = groups.get(key)
            groups[key] = acc[g] if cur is None else cur + acc[g]

    def finalize(self, ctx=None) -> None:
        """``cuptiPCSamplingDisable`` on ``ctx`` (None: every configured context); errors ignored."""
        with self._lock:
            for c in ([ctx] if ctx is not None else list(self.contexts)):
                if self.contexts.pop(c, None) is not None:
                    self.lib.pc_sampling_disable(self._context(c))
            if ctx is None:
                self.started = False


_LAUNCH = frozenset(DRIVER_LAUNCH_CBIDS.values())
__all__ = ["PCSampler", "ContextConfig", "METRIC_NAMES", "match_stall_reasons", "pc_sampling_period", "CuptiError"]
