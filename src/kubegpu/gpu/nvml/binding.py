"""kubegpu's own ctypes binding to the NVML C API (``libnvidia-ml.so.1``): the calls the backend makes, nothing else.

Owns the loaded library (one per process, handed over by :mod:`.library`), the
C struct layouts of ``nvml.h`` those calls fill, the buffer sizes and enum values
they take, and turning a non-zero ``nvmlReturn_t`` into :class:`NvmlError`
(a symbol the library lacks is ``NVML_ERROR_FUNCTION_NOT_FOUND``, a call before
the library is loaded ``NVML_ERROR_UNINITIALIZED``, as NVIDIA's own bindings
answer). Each function is named as its C entry point and calls the versioned
symbol NVIDIA's plugin calls (``nvmlDeviceGetCount_v2``, ``nvmlDeviceGetPciInfo_v3``,
``nvmlEventSetWait_v2`` ...). Must not find or choose the library file (that is
:mod:`.library`) and must not interpret what NVML answers (that is
:mod:`.discovery`, :mod:`.events`, :mod:`.telemetry`).

Why our own and not nvidia-ml-py: that module defines every NVML struct and call
at import, which costs the plugin process about 2.6 MiB of its resident memory
for the thirty-odd calls it makes. The layouts here are checked field by field
against nvidia-ml-py's in the tests.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any, TypeVar

from kubegpu.gpu import errors
from kubegpu.gpu.nvml import decode

# --- sizes and enums (nvml.h) -----------------------------------------------------------

DEVICE_UUID_V2_BUFFER_SIZE = 96
DEVICE_NAME_V2_BUFFER_SIZE = 96
DEVICE_SERIAL_BUFFER_SIZE = 30
DEVICE_VBIOS_VERSION_BUFFER_SIZE = 32
DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16
SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80
GPU_FABRIC_UUID_LEN = 16
NVLINK_MAX_LINKS = 36
GPU_INSTANCE_PROFILE_COUNT = 0x12
COMPUTE_INSTANCE_PROFILE_COUNT = 0x9
COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
DEVICE_MIG_ENABLE = 1

TEMPERATURE_GPU = 0
CLOCK_SM = 1
CLOCK_MEM = 2
PCIE_UTIL_TX_BYTES = 0
PCIE_UTIL_RX_BYTES = 1
PERF_POLICY_POWER = 0
PERF_POLICY_THERMAL = 1
VOLATILE_ECC = 0
AGGREGATE_ECC = 1
MEMORY_ERROR_TYPE_CORRECTED = 0
MEMORY_ERROR_TYPE_UNCORRECTED = 1
PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1

FI_DEV_MEMORY_TEMP = 82
FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139

VALUE_TYPE_DOUBLE = 0
VALUE_TYPE_UNSIGNED_INT = 1
VALUE_TYPE_UNSIGNED_LONG = 2
VALUE_TYPE_UNSIGNED_LONG_LONG = 3
VALUE_TYPE_SIGNED_LONG_LONG = 4
VALUE_TYPE_SIGNED_INT = 5
VALUE_TYPE_UNSIGNED_SHORT = 6


# --- handles and structs ----------------------------------------------------------------


class _Opaque(ctypes.Structure):
    """What an NVML handle points at; never read."""


#: nvmlDevice_t, nvmlGpuInstance_t, nvmlComputeInstance_t, nvmlEventSet_t: opaque pointers.
Handle = ctypes.POINTER(_Opaque)


class PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * DEVICE_PCI_BUS_ID_BUFFER_SIZE),
    ]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class DeviceAttributes(ctypes.Structure):
    _fields_ = [
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
        ("gpuInstanceSliceCount", ctypes.c_uint),
        ("computeInstanceSliceCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]


class Placement(ctypes.Structure):
    """nvmlGpuInstancePlacement_t and nvmlComputeInstancePlacement_t (the same layout)."""

    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class GpuInstanceInfo(ctypes.Structure):
    _fields_ = [("device", Handle), ("id", ctypes.c_uint), ("profileId", ctypes.c_uint), ("placement", Placement)]


class ComputeInstanceInfo(ctypes.Structure):
    _fields_ = [
        ("device", Handle),
        ("gpuInstance", Handle),
        ("id", ctypes.c_uint),
        ("profileId", ctypes.c_uint),
        ("placement", Placement),
    ]


_GPU_INSTANCE_PROFILE_COUNTS = [
    ("id", ctypes.c_uint),
    ("isP2pSupported", ctypes.c_uint),
    ("sliceCount", ctypes.c_uint),
    ("instanceCount", ctypes.c_uint),
    ("multiprocessorCount", ctypes.c_uint),
    ("copyEngineCount", ctypes.c_uint),
    ("decoderCount", ctypes.c_uint),
    ("encoderCount", ctypes.c_uint),
    ("jpegCount", ctypes.c_uint),
    ("ofaCount", ctypes.c_uint),
    ("memorySizeMB", ctypes.c_ulonglong),
]


class GpuInstanceProfileInfo(ctypes.Structure):
    _fields_ = _GPU_INSTANCE_PROFILE_COUNTS


class GpuInstanceProfileInfoV2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        *_GPU_INSTANCE_PROFILE_COUNTS,
        ("name", ctypes.c_char * DEVICE_NAME_V2_BUFFER_SIZE),
    ]


_COMPUTE_INSTANCE_PROFILE_COUNTS = [
    ("id", ctypes.c_uint),
    ("sliceCount", ctypes.c_uint),
    ("instanceCount", ctypes.c_uint),
    ("multiprocessorCount", ctypes.c_uint),
    ("sharedCopyEngineCount", ctypes.c_uint),
    ("sharedDecoderCount", ctypes.c_uint),
    ("sharedEncoderCount", ctypes.c_uint),
    ("sharedJpegCount", ctypes.c_uint),
    ("sharedOfaCount", ctypes.c_uint),
]


class ComputeInstanceProfileInfo(ctypes.Structure):
    _fields_ = _COMPUTE_INSTANCE_PROFILE_COUNTS


class ComputeInstanceProfileInfoV2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        *_COMPUTE_INSTANCE_PROFILE_COUNTS,
        ("name", ctypes.c_char * DEVICE_NAME_V2_BUFFER_SIZE),
    ]


class GpuFabricInfo(ctypes.Structure):
    _fields_ = [
        ("clusterUuid", ctypes.c_uint8 * GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint8),
    ]


class EventData(ctypes.Structure):
    _fields_ = [
        ("device", Handle),
        ("eventType", ctypes.c_ulonglong),
        ("eventData", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class ViolationTime(ctypes.Structure):
    _fields_ = [("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong)]


class Value(ctypes.Union):
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("siVal", ctypes.c_int),
        ("usVal", ctypes.c_ushort),
    ]


class FieldValue(ctypes.Structure):
    _fields_ = [
        ("fieldId", ctypes.c_uint32),
        ("scopeId", ctypes.c_uint32),
        ("timestamp", ctypes.c_int64),
        ("latencyUsec", ctypes.c_int64),
        ("valueType", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_uint),
        ("value", Value),
    ]


def struct_version(struct: type[ctypes.Structure], version: int) -> int:
    """NVML_STRUCT_VERSION: the version in the top byte, the struct's size below."""
    return (version << 24) | ctypes.sizeof(struct)


MEMORY_V2_VERSION = struct_version(MemoryV2, 2)
GPU_INSTANCE_PROFILE_INFO_V2_VERSION = struct_version(GpuInstanceProfileInfoV2, 2)
COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION = struct_version(ComputeInstanceProfileInfoV2, 2)


# --- the library and errors -------------------------------------------------------------

_S = TypeVar("_S", bound=ctypes.Structure)

_lock = threading.Lock()
_library: ctypes.CDLL | None = None


class NvmlError(errors.GpuError):
    """An NVML call returned ``code`` (an ``nvmlReturn_t``); the text is the library's own ``nvmlErrorString``.

    The backend's modules turn it into :class:`~kubegpu.gpu.errors.NvmlUnavailable` (or None, for a reading a
    device lacks) before it leaves the package.
    """

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        library = _library
        if library is not None:
            try:
                describe = library.nvmlErrorString
            except AttributeError:
                pass
            else:
                describe.restype = ctypes.c_char_p
                text = describe(self.code)
                if text:
                    return str(text.decode(errors="replace"))
        return f"NVML error {self.code}"


def loaded() -> ctypes.CDLL | None:
    """The library this process calls, or None before :func:`load`."""
    return _library


def load(library: ctypes.CDLL) -> ctypes.CDLL:
    """Make ``library`` the one every call goes to, unless one is loaded already; returns the one in use."""
    global _library
    with _lock:
        if _library is None:
            _library = library
        return _library


def _symbol(name: str) -> Any:
    library = _library
    if library is None:
        raise NvmlError(decode.ERROR_UNINITIALIZED)
    try:
        return getattr(library, name)
    except AttributeError:
        raise NvmlError(decode.ERROR_FUNCTION_NOT_FOUND) from None


def _call(name: str, *args: Any) -> None:
    code = _symbol(name)(*args)
    if code != decode.SUCCESS:
        raise NvmlError(code)


def _scalar(name: str, ctype: Any, *args: Any) -> Any:
    """A call whose last argument is one value written back."""
    out = ctype()
    _call(name, *args, ctypes.byref(out))
    return out.value


def _string(name: str, size: int, *args: Any) -> str:
    buffer = ctypes.create_string_buffer(size)
    _call(name, *args, buffer, ctypes.c_uint(size))
    return buffer.value.decode(errors="replace")


def _handle(name: str, *args: Any) -> Any:
    out = Handle()
    _call(name, *args, ctypes.byref(out))
    return out


def _struct(name: str, struct: _S, *args: Any) -> _S:
    """A call whose last argument is a struct filled in place; returns that struct."""
    _call(name, *args, ctypes.byref(struct))
    return struct


# --- system -----------------------------------------------------------------------------


def nvmlInitWithFlags(flags: int) -> None:
    _call("nvmlInitWithFlags", ctypes.c_uint(flags))


def nvmlShutdown() -> None:
    _call("nvmlShutdown")


def nvmlSystemGetDriverVersion() -> str:
    return _string("nvmlSystemGetDriverVersion", SYSTEM_DRIVER_VERSION_BUFFER_SIZE)


def nvmlSystemGetCudaDriverVersion() -> int:
    return int(_scalar("nvmlSystemGetCudaDriverVersion", ctypes.c_int))


# --- devices ----------------------------------------------------------------------------


def nvmlDeviceGetCount() -> int:
    return int(_scalar("nvmlDeviceGetCount_v2", ctypes.c_uint))


def nvmlDeviceGetHandleByIndex(index: int) -> Any:
    return _handle("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index))


def nvmlDeviceGetUUID(device: Any) -> str:
    return _string("nvmlDeviceGetUUID", DEVICE_UUID_V2_BUFFER_SIZE, device)


def nvmlDeviceGetName(device: Any) -> str:
    return _string("nvmlDeviceGetName", DEVICE_NAME_V2_BUFFER_SIZE, device)


def nvmlDeviceGetSerial(device: Any) -> str:
    return _string("nvmlDeviceGetSerial", DEVICE_SERIAL_BUFFER_SIZE, device)


def nvmlDeviceGetVbiosVersion(device: Any) -> str:
    return _string("nvmlDeviceGetVbiosVersion", DEVICE_VBIOS_VERSION_BUFFER_SIZE, device)


def nvmlDeviceGetMinorNumber(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetMinorNumber", ctypes.c_uint, device))


def nvmlDeviceGetMemoryInfo(device: Any) -> Memory:
    return _struct("nvmlDeviceGetMemoryInfo", Memory(), device)


def nvmlDeviceGetMemoryInfo_v2(device: Any) -> MemoryV2:
    return _struct("nvmlDeviceGetMemoryInfo_v2", MemoryV2(version=MEMORY_V2_VERSION), device)


def nvmlDeviceGetPciInfo(device: Any) -> PciInfo:
    return _struct("nvmlDeviceGetPciInfo_v3", PciInfo(), device)


def nvmlDeviceGetCudaComputeCapability(device: Any) -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _call("nvmlDeviceGetCudaComputeCapability", device, ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def nvmlDeviceGetMigMode(device: Any) -> tuple[int, int]:
    """(current, pending) MIG mode."""
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    _call("nvmlDeviceGetMigMode", device, ctypes.byref(current), ctypes.byref(pending))
    return current.value, pending.value


def nvmlDeviceGetNumGpuCores(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetNumGpuCores", ctypes.c_uint, device))


def nvmlDeviceGetPowerManagementLimit(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetPowerManagementLimit", ctypes.c_uint, device))


def nvmlDeviceGetMaxClockInfo(device: Any, clock: int) -> int:
    return int(_scalar("nvmlDeviceGetMaxClockInfo", ctypes.c_uint, device, ctypes.c_uint(clock)))


def nvmlDeviceGetGpuFabricInfo(device: Any) -> GpuFabricInfo:
    return _struct("nvmlDeviceGetGpuFabricInfo", GpuFabricInfo(), device)


def nvmlDeviceGetTopologyCommonAncestor(device1: Any, device2: Any) -> int:
    return int(_scalar("nvmlDeviceGetTopologyCommonAncestor", ctypes.c_uint, device1, device2))


def nvmlDeviceGetNvLinkState(device: Any, link: int) -> int:
    return int(_scalar("nvmlDeviceGetNvLinkState", ctypes.c_uint, device, ctypes.c_uint(link)))


def nvmlDeviceGetNvLinkRemotePciInfo(device: Any, link: int) -> PciInfo:
    return _struct("nvmlDeviceGetNvLinkRemotePciInfo_v2", PciInfo(), device, ctypes.c_uint(link))


def nvmlDeviceGetNvLinkRemoteDeviceType(device: Any, link: int) -> int:
    return int(_scalar("nvmlDeviceGetNvLinkRemoteDeviceType", ctypes.c_uint, device, ctypes.c_uint(link)))


# --- MIG --------------------------------------------------------------------------------


def nvmlDeviceGetMaxMigDeviceCount(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetMaxMigDeviceCount", ctypes.c_uint, device))


def nvmlDeviceGetMigDeviceHandleByIndex(device: Any, index: int) -> Any:
    return _handle("nvmlDeviceGetMigDeviceHandleByIndex", device, ctypes.c_uint(index))


def nvmlDeviceGetAttributes(device: Any) -> DeviceAttributes:
    return _struct("nvmlDeviceGetAttributes_v2", DeviceAttributes(), device)


def nvmlDeviceGetGpuInstanceId(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetGpuInstanceId", ctypes.c_uint, device))


def nvmlDeviceGetComputeInstanceId(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetComputeInstanceId", ctypes.c_uint, device))


def nvmlDeviceGetGpuInstanceById(device: Any, gpu_instance_id: int) -> Any:
    return _handle("nvmlDeviceGetGpuInstanceById", device, ctypes.c_uint(gpu_instance_id))


def nvmlGpuInstanceGetInfo(gpu_instance: Any) -> GpuInstanceInfo:
    return _struct("nvmlGpuInstanceGetInfo", GpuInstanceInfo(), gpu_instance)


def nvmlGpuInstanceGetComputeInstanceById(gpu_instance: Any, compute_instance_id: int) -> Any:
    return _handle("nvmlGpuInstanceGetComputeInstanceById", gpu_instance, ctypes.c_uint(compute_instance_id))


def nvmlComputeInstanceGetInfo(compute_instance: Any) -> ComputeInstanceInfo:
    return _struct("nvmlComputeInstanceGetInfo_v2", ComputeInstanceInfo(), compute_instance)


def nvmlDeviceGetGpuInstanceProfileInfo(device: Any, profile: int) -> GpuInstanceProfileInfo:
    return _struct("nvmlDeviceGetGpuInstanceProfileInfo", GpuInstanceProfileInfo(), device, ctypes.c_uint(profile))


def nvmlDeviceGetGpuInstanceProfileInfoV(device: Any, profile: int) -> GpuInstanceProfileInfoV2:
    info = GpuInstanceProfileInfoV2(version=GPU_INSTANCE_PROFILE_INFO_V2_VERSION)
    return _struct("nvmlDeviceGetGpuInstanceProfileInfoV", info, device, ctypes.c_uint(profile))


def nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gpu_instance: Any, profile: int, engine_profile: int
) -> ComputeInstanceProfileInfo:
    args = (gpu_instance, ctypes.c_uint(profile), ctypes.c_uint(engine_profile))
    return _struct("nvmlGpuInstanceGetComputeInstanceProfileInfo", ComputeInstanceProfileInfo(), *args)


def nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    gpu_instance: Any, profile: int, engine_profile: int
) -> ComputeInstanceProfileInfoV2:
    info = ComputeInstanceProfileInfoV2(version=COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION)
    args = (gpu_instance, ctypes.c_uint(profile), ctypes.c_uint(engine_profile))
    return _struct("nvmlGpuInstanceGetComputeInstanceProfileInfoV", info, *args)


# --- events -----------------------------------------------------------------------------


def nvmlEventSetCreate() -> Any:
    return _handle("nvmlEventSetCreate")


def nvmlEventSetFree(event_set: Any) -> None:
    _call("nvmlEventSetFree", event_set)


def nvmlDeviceGetSupportedEventTypes(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetSupportedEventTypes", ctypes.c_ulonglong, device))


def nvmlDeviceRegisterEvents(device: Any, event_types: int, event_set: Any) -> None:
    _call("nvmlDeviceRegisterEvents", device, ctypes.c_ulonglong(event_types), event_set)


def nvmlEventSetWait(event_set: Any, timeout_ms: int) -> EventData:
    data = EventData()
    _call("nvmlEventSetWait_v2", event_set, ctypes.byref(data), ctypes.c_uint(timeout_ms))
    return data


# --- telemetry --------------------------------------------------------------------------


def nvmlDeviceGetTemperature(device: Any, sensor: int) -> int:
    return int(_scalar("nvmlDeviceGetTemperature", ctypes.c_uint, device, ctypes.c_uint(sensor)))


def nvmlDeviceGetUtilizationRates(device: Any) -> Utilization:
    return _struct("nvmlDeviceGetUtilizationRates", Utilization(), device)


def _utilization_and_period(name: str, device: Any) -> tuple[int, int]:
    util, period = ctypes.c_uint(), ctypes.c_uint()
    _call(name, device, ctypes.byref(util), ctypes.byref(period))
    return util.value, period.value


def nvmlDeviceGetEncoderUtilization(device: Any) -> tuple[int, int]:
    """(utilisation %, sampling period µs)."""
    return _utilization_and_period("nvmlDeviceGetEncoderUtilization", device)


def nvmlDeviceGetDecoderUtilization(device: Any) -> tuple[int, int]:
    """(utilisation %, sampling period µs)."""
    return _utilization_and_period("nvmlDeviceGetDecoderUtilization", device)


def nvmlDeviceGetPowerUsage(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetPowerUsage", ctypes.c_uint, device))


def nvmlDeviceGetEnforcedPowerLimit(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetEnforcedPowerLimit", ctypes.c_uint, device))


def nvmlDeviceGetTotalEnergyConsumption(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetTotalEnergyConsumption", ctypes.c_ulonglong, device))


def nvmlDeviceGetClockInfo(device: Any, clock: int) -> int:
    return int(_scalar("nvmlDeviceGetClockInfo", ctypes.c_uint, device, ctypes.c_uint(clock)))


def nvmlDeviceGetPcieThroughput(device: Any, counter: int) -> int:
    return int(_scalar("nvmlDeviceGetPcieThroughput", ctypes.c_uint, device, ctypes.c_uint(counter)))


def nvmlDeviceGetPcieReplayCounter(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetPcieReplayCounter", ctypes.c_uint, device))


def nvmlDeviceGetTotalEccErrors(device: Any, error_type: int, counter_type: int) -> int:
    args = (device, ctypes.c_uint(error_type), ctypes.c_uint(counter_type))
    return int(_scalar("nvmlDeviceGetTotalEccErrors", ctypes.c_ulonglong, *args))


def nvmlDeviceGetRetiredPages(device: Any, cause: int) -> list[int]:
    """The addresses of the pages retired for ``cause`` (asks for the count, then the pages)."""
    fn = _symbol("nvmlDeviceGetRetiredPages")
    count = ctypes.c_uint(0)
    code = fn(device, ctypes.c_uint(cause), ctypes.byref(count), None)
    if code not in (decode.SUCCESS, decode.ERROR_INSUFFICIENT_SIZE):
        raise NvmlError(code)
    count.value = count.value * 2 + 5  # room for pages retired between the two calls
    pages = (ctypes.c_ulonglong * count.value)()
    code = fn(device, ctypes.c_uint(cause), ctypes.byref(count), pages)
    if code != decode.SUCCESS:
        raise NvmlError(code)
    return [int(p) for p in pages[: count.value]]


def nvmlDeviceGetRetiredPagesPendingStatus(device: Any) -> int:
    return int(_scalar("nvmlDeviceGetRetiredPagesPendingStatus", ctypes.c_uint, device))


def nvmlDeviceGetRemappedRows(device: Any) -> tuple[int, int, int, int]:
    """(correctable, uncorrectable, remapping pending, remapping failed)."""
    out = [ctypes.c_uint() for _ in range(4)]
    _call("nvmlDeviceGetRemappedRows", device, *(ctypes.byref(v) for v in out))
    return out[0].value, out[1].value, out[2].value, out[3].value


def nvmlDeviceGetViolationStatus(device: Any, policy: int) -> ViolationTime:
    return _struct("nvmlDeviceGetViolationStatus", ViolationTime(), device, ctypes.c_uint(policy))


def nvmlDeviceGetFieldValues(device: Any, fields: Sequence[int | tuple[int, int]]) -> Any:
    """One FieldValue per requested field: a field id, or (field id, scope id) for per-link fields."""
    values = (FieldValue * len(fields))()
    for value, field in zip(values, fields, strict=True):
        if isinstance(field, tuple):
            value.fieldId, value.scopeId = field
        else:
            value.fieldId = field
    _call("nvmlDeviceGetFieldValues", device, ctypes.c_int(len(fields)), values)
    return values
