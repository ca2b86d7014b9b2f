"""ctypes mirrors of ``cupti_pcsampling.h`` (CUPTI PC Sampling API) and the callback fields it needs.

Sizes and offsets were measured with ``offsetof``/``sizeof`` on the CUPTI 12.8 headers
shipped in the triton wheel (``CUPTI_API_VERSION`` 26):

=====================================  ======  =========================================
struct                                  sizeof  notes
=====================================  ======  =========================================
CUpti_PCSamplingStallReason                  8  index u32, samples u32
CUpti_PCSamplingPCData                      64  ``correlationId`` (CUPTI >= 12.4) at 56
CUpti_PCSamplingData                        80  ``hardwareBufferFull`` u8 at 72
CUpti_PCSamplingConfigurationInfo           32  union ``attributeData`` at 8
=====================================  ======  =========================================

Every ``CUpti_*Params`` struct carries a ``size`` that must be set to the header's
``CUpti_*ParamsSize`` macro, ``offsetof(type, lastfield) + sizeof(lastfield)``;
:func:`params_size` computes exactly that from the ctypes field table.
"""
from __future__ import annotations

import ctypes

U8, U32, U64, SIZE_T, VOIDP = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p

# ------------------------------------------------------------------ enums and constants
ATTR_SAMPLING_PERIOD = 1
ATTR_STALL_REASON = 2
ATTR_SCRATCH_BUFFER_SIZE = 3
ATTR_HARDWARE_BUFFER_SIZE = 4
ATTR_COLLECTION_MODE = 5
ATTR_ENABLE_START_STOP_CONTROL = 6
ATTR_OUTPUT_DATA_FORMAT = 7
ATTR_SAMPLING_DATA_BUFFER = 8
COLLECTION_MODE_CONTINUOUS = 1
COLLECTION_MODE_KERNEL_SERIALIZED = 2
STALL_REASON_STRING_SIZE = 128
#: ``cuptiGetVersion`` from which ``CUpti_PCSamplingPCData`` has ``correlationId`` (CUDA 12.4).
PCDATA_CORRELATION_VERSION = 22

#: Resource-domain callback ids (``CUpti_CallbackIdResource``).
RESOURCE_CONTEXT_CREATED = 1
RESOURCE_CONTEXT_DESTROY_STARTING = 2
RESOURCE_MODULE_LOADED = 6
RESOURCE_MODULE_UNLOAD_STARTING = 7
#: ``CUpti_ApiCallbackSite``.
CB_SITE_ENTER, CB_SITE_EXIT = 0, 1

# ------------------------------------------------------------------ callback payload offsets (64-bit)
#: ``CUpti_CallbackData``: callbackSite (int) at 0, symbolName at 32, context at 40.
CALLBACK_SITE_OFFSET = 0
CALLBACK_SYMBOL_OFFSET = 32
CALLBACK_CONTEXT_OFFSET = 40
#: ``CUpti_ResourceData``: context at 0, resourceDescriptor at 16.
RESOURCE_CONTEXT_OFFSET = 0
RESOURCE_DESCRIPTOR_OFFSET = 16
#: ``CUpti_ModuleResourceData``: moduleId u32 at 0, cubinSize at 8, pCubin at 16.
MODULE_CUBIN_SIZE_OFFSET = 8
MODULE_CUBIN_OFFSET = 16


# ------------------------------------------------------------------ data structs
class StallReason(ctypes.Structure):
    """``CUpti_PCSamplingStallReason``."""
    _fields_ = [("pcSamplingStallReasonIndex", U32), ("samples", U32)]


class PCData(ctypes.Structure):
    """``CUpti_PCSamplingPCData`` (CUPTI >= 12.4 layout, 64 bytes)."""
    _fields_ = [("size", SIZE_T), ("cubinCrc", U64), ("pcOffset", U64), ("functionIndex", U32), ("pad", U32),
                ("functionName", VOIDP), ("stallReasonCount", SIZE_T), ("stallReason", VOIDP),
                ("correlationId", U32)]


class PCDataLegacy(ctypes.Structure):
    """``CUpti_PCSamplingPCData`` before CUPTI 12.4 (no ``correlationId``, 56 bytes)."""
    _fields_ = PCData._fields_[:-1]


class PCSamplingData(ctypes.Structure):
    """``CUpti_PCSamplingData``: the buffer CUPTI fills on stop / ``cuptiPCSamplingGetData``."""
    _fields_ = [("size", SIZE_T), ("collectNumPcs", SIZE_T), ("totalSamples", U64), ("droppedSamples", U64),
                ("totalNumPcs", SIZE_T), ("remainingNumPcs", SIZE_T), ("rangeId", U64), ("pPcData", VOIDP),
                ("nonUsrKernelsTotalSamples", U64), ("hardwareBufferFull", U8)]


class _StallReasonData(ctypes.Structure):
    _fields_ = [("stallReasonCount", SIZE_T), ("pStallReasonIndex", VOIDP)]


class _AttributeData(ctypes.Union):
    _fields_ = [("invalidData", U64 * 3), ("samplingPeriod", U32), ("stallReasonData", _StallReasonData),
                ("scratchBufferSize", SIZE_T), ("hardwareBufferSize", SIZE_T), ("collectionMode", ctypes.c_int),
                ("enableStartStopControl", U32), ("outputDataFormat", ctypes.c_int),
                ("samplingDataBuffer", VOIDP), ("workerThreadPeriodicSleepSpan", U32)]


class ConfigurationInfo(ctypes.Structure):
    """``CUpti_PCSamplingConfigurationInfo`` (32 bytes)."""
    _fields_ = [("attributeType", ctypes.c_int), ("attributeStatus", ctypes.c_int), ("attributeData", _AttributeData)]


# ------------------------------------------------------------------ params structs
class ConfigurationInfoParams(ctypes.Structure):
    """``CUpti_PCSamplingConfigurationInfoParams``."""
    _fields_ = [("size", SIZE_T), ("pPriv", VOIDP), ("ctx", VOIDP), ("numAttributes", SIZE_T),
                ("pPCSamplingConfigurationInfo", VOIDP)]


class ContextParams(ctypes.Structure):
    """``CUpti_PCSampling{Enable,Disable,Start,Stop}Params`` (identical layouts)."""
    _fields_ = [("size", SIZE_T), ("pPriv", VOIDP), ("ctx", VOIDP)]


class GetDataParams(ctypes.Structure):
    """``CUpti_PCSamplingGetDataParams``."""
    _fields_ = [("size", SIZE_T), ("pPriv", VOIDP), ("ctx", VOIDP), ("pcSamplingData", VOIDP)]


class GetNumStallReasonsParams(ctypes.Structure):
    """``CUpti_PCSamplingGetNumStallReasonsParams``."""
    _fields_ = [("size", SIZE_T), ("pPriv", VOIDP), ("ctx", VOIDP), ("numStallReasons", VOIDP)]


class GetStallReasonsParams(ctypes.Structure):
    """``CUpti_PCSamplingGetStallReasonsParams``."""
    _fields_ = [("size", SIZE_T), ("pPriv", VOIDP), ("ctx", VOIDP), ("numStallReasons", SIZE_T),
                ("stallReasonIndex", VOIDP), ("stallReasons", VOIDP)]


class SassToSourceParams(ctypes.Structure):
    """``CUpti_GetSassToSourceCorrelationParams`` (fileName/dirName are malloc'd by CUPTI)."""
    _fields_ = [("size", SIZE_T), ("cubin", VOIDP), ("functionName", VOIDP), ("cubinSize", SIZE_T),
                ("lineNumber", U32), ("pcOffset", U64), ("fileName", VOIDP), ("dirName", VOIDP)]


class CubinCrcParams(ctypes.Structure):
    """``CUpti_GetCubinCrcParams``."""
    _fields_ = [("size", SIZE_T), ("cubinSize", SIZE_T), ("cubin", VOIDP), ("cubinCrc", U64)]


def params_size(cls) -> int:
    """``CUPTI_PCSAMPLING_STRUCT_SIZE(cls, <last field>)``: offset of the last field plus its size."""
    name, ctype = cls._fields_[-1][:2]
    return getattr(cls, name).offset + ctypes.sizeof(ctype)


def make_params(cls, **fields):
    """An instance of params struct ``cls`` with ``size`` set as the header's macro does."""
    p = cls(**fields)
    p.size = params_size(cls)
    return p


def pcdata_struct(cupti_version: int):
    """The ``CUpti_PCSamplingPCData`` layout libcupti of ``cupti_version`` writes."""
    return PCData if cupti_version >= PCDATA_CORRELATION_VERSION else PCDataLegacy
