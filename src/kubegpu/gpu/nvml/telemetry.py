"""Telemetry samples read through NVML, one :class:`~kubegpu.gpu.telemetry.GpuSample` per GPU.

Owns which NVML call answers which reading and the unit conversions (mW to W,
bytes to MiB, KiB/s to bytes/s): utilisation, framebuffer used/free/reserved/
total, temperatures, power and its limit, energy since boot, SM and memory
clocks, PCIe throughput and replays, ECC totals, retired pages, remapped rows,
NVLink bandwidth, power/thermal violation time, and per-MIG-device memory. A
reading NVML does not offer on a device (NOT_SUPPORTED and the like) is None;
a GPU that answers GPU_IS_LOST gives a sample with ``available=False``. The
profiling ratios (``*_active``) need DCGM/GPM and stay None here. Must not keep
state between samples (the last XID comes from the event watcher).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kubegpu.gpu.model import Gpu
from kubegpu.gpu.nvml import binding, decode
from kubegpu.gpu.telemetry import GpuSample, MigSample

T = TypeVar("T")

_MIB = 1024 * 1024


class _Lost(Exception):
    """The GPU answered GPU_IS_LOST: nothing else it says is valid."""


def _read(fn: Callable[..., T], *args: Any) -> T | None:
    """One NVML reading; None when NVML cannot give it on this device, _Lost when the GPU is gone."""
    try:
        return fn(*args)
    except binding.NvmlError as exc:
        if exc.code == decode.ERROR_GPU_IS_LOST:
            raise _Lost from None
        return None


def _mib(value: int | None) -> float | None:
    return None if value is None else value / _MIB


def _scaled(value: int | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _memory(handle: Any) -> tuple[float | None, float | None, float | None, float | None]:
    """(used, free, reserved, total) in MiB; the v2 struct splits out reserved memory, v1 counts it as used."""
    v2 = _read(binding.nvmlDeviceGetMemoryInfo_v2, handle)
    if v2 is not None:
        return _mib(v2.used), _mib(v2.free), _mib(v2.reserved), _mib(v2.total)
    v1 = _read(binding.nvmlDeviceGetMemoryInfo, handle)
    if v1 is None:
        return None, None, None, None
    return _mib(v1.used), _mib(v1.free), None, _mib(v1.total)


def _field(values: Any, i: int) -> float | None:
    value = values[i]
    if int(value.nvmlReturn) != decode.SUCCESS:
        return None
    kind = int(value.valueType)
    if kind == binding.VALUE_TYPE_DOUBLE:
        return float(value.value.dVal)
    if kind == binding.VALUE_TYPE_UNSIGNED_INT:
        return float(value.value.uiVal)
    if kind == binding.VALUE_TYPE_UNSIGNED_LONG:
        return float(value.value.ulVal)
    if kind == binding.VALUE_TYPE_UNSIGNED_LONG_LONG:
        return float(value.value.ullVal)
    if kind == binding.VALUE_TYPE_SIGNED_LONG_LONG:
        return float(value.value.sllVal)
    if kind == binding.VALUE_TYPE_SIGNED_INT:
        return float(value.value.siVal)
    return None


def _fields(handle: Any, links: Sequence[int]) -> tuple[float | None, float | None]:
    """(memory temperature °C, NVLink bytes moved since boot over all active links)."""
    ids: list[int | tuple[int, int]] = [binding.FI_DEV_MEMORY_TEMP]
    for link in links:
        ids.append((binding.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link))
        ids.append((binding.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link))
    values = _read(binding.nvmlDeviceGetFieldValues, handle, ids)
    if values is None:
        return None, None
    memory_temp = _field(values, 0)
    per_link = [_field(values, i) for i in range(1, len(ids))]
    known = [v for v in per_link if v is not None]
    nvlink = sum(known) * 1024 if known else None  # the counters are KiB
    return memory_temp, nvlink


def _count(pages: list[int] | None) -> float | None:
    return None if pages is None else float(len(pages))


def _mig(gpu: Gpu, handles: dict[str, Any]) -> tuple[MigSample, ...]:
    out = []
    for device in gpu.mig_devices:
        handle = handles.get(device.uuid)
        memory = None if handle is None else _read(binding.nvmlDeviceGetMemoryInfo, handle)
        out.append(
            MigSample(
                uuid=device.uuid,
                parent_uuid=gpu.uuid,
                gi_id=device.gi_id,
                ci_id=device.ci_id,
                profile=device.profile,
                fb_used_mib=None if memory is None else _mib(memory.used),
                fb_free_mib=None if memory is None else _mib(memory.free),
                fb_total_mib=None if memory is None else _mib(memory.total),
            )
        )
    return tuple(out)


def sample_gpu(gpu: Gpu, handle: Any, mig_handles: dict[str, Any], links: Sequence[int], last_xid: int) -> GpuSample:
    """Everything NVML offers about one GPU now."""
    try:
        return _sample(gpu, handle, mig_handles, links, last_xid)
    except _Lost:
        return GpuSample(uuid=gpu.uuid, index=gpu.index, available=False, xid_last=last_xid)


def _sample(gpu: Gpu, handle: Any, mig_handles: dict[str, Any], links: Sequence[int], last_xid: int) -> GpuSample:
    util = _read(binding.nvmlDeviceGetUtilizationRates, handle)
    encoder = _read(binding.nvmlDeviceGetEncoderUtilization, handle)
    decoder = _read(binding.nvmlDeviceGetDecoderUtilization, handle)
    used, free, reserved, total = _memory(handle)
    memory_temp, nvlink_bytes = _fields(handle, links)
    remapped = _read(binding.nvmlDeviceGetRemappedRows, handle)
    pending = _read(binding.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    power_violation = _read(binding.nvmlDeviceGetViolationStatus, handle, binding.PERF_POLICY_POWER)
    thermal_violation = _read(binding.nvmlDeviceGetViolationStatus, handle, binding.PERF_POLICY_THERMAL)

    def ecc(error_type: int, counter: int) -> float | None:
        return _scaled(_read(binding.nvmlDeviceGetTotalEccErrors, handle, error_type, counter), 1.0)

    def pages(cause: int) -> float | None:
        return _count(_read(binding.nvmlDeviceGetRetiredPages, handle, cause))

    return GpuSample(
        uuid=gpu.uuid,
        index=gpu.index,
        gpu_util_pct=None if util is None else float(util.gpu),
        mem_copy_util_pct=None if util is None else float(util.memory),
        enc_util_pct=None if encoder is None else float(encoder[0]),
        dec_util_pct=None if decoder is None else float(decoder[0]),
        fb_used_mib=used,
        fb_free_mib=free,
        fb_reserved_mib=reserved,
        fb_total_mib=total,
        gpu_temp_c=_scaled(_read(binding.nvmlDeviceGetTemperature, handle, binding.TEMPERATURE_GPU), 1.0),
        memory_temp_c=memory_temp,
        power_w=_scaled(_read(binding.nvmlDeviceGetPowerUsage, handle), 1e-3),
        power_limit_w=_scaled(_read(binding.nvmlDeviceGetEnforcedPowerLimit, handle), 1e-3),
        total_energy_mj=_scaled(_read(binding.nvmlDeviceGetTotalEnergyConsumption, handle), 1.0),
        sm_clock_mhz=_scaled(_read(binding.nvmlDeviceGetClockInfo, handle, binding.CLOCK_SM), 1.0),
        mem_clock_mhz=_scaled(_read(binding.nvmlDeviceGetClockInfo, handle, binding.CLOCK_MEM), 1.0),
        pcie_tx_bytes_per_s=_scaled(
            _read(binding.nvmlDeviceGetPcieThroughput, handle, binding.PCIE_UTIL_TX_BYTES), 1024.0
        ),
        pcie_rx_bytes_per_s=_scaled(
            _read(binding.nvmlDeviceGetPcieThroughput, handle, binding.PCIE_UTIL_RX_BYTES), 1024.0
        ),
        pcie_replay_total=_scaled(_read(binding.nvmlDeviceGetPcieReplayCounter, handle), 1.0),
        xid_last=last_xid,
        ecc_sbe_volatile_total=ecc(binding.MEMORY_ERROR_TYPE_CORRECTED, binding.VOLATILE_ECC),
        ecc_dbe_volatile_total=ecc(binding.MEMORY_ERROR_TYPE_UNCORRECTED, binding.VOLATILE_ECC),
        ecc_sbe_aggregate_total=ecc(binding.MEMORY_ERROR_TYPE_CORRECTED, binding.AGGREGATE_ECC),
        ecc_dbe_aggregate_total=ecc(binding.MEMORY_ERROR_TYPE_UNCORRECTED, binding.AGGREGATE_ECC),
        retired_pages_sbe=pages(binding.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        retired_pages_dbe=pages(binding.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        retired_pages_pending=None if pending is None else float(pending),
        remapped_rows_correctable=None if remapped is None else float(remapped[0]),
        remapped_rows_uncorrectable=None if remapped is None else float(remapped[1]),
        row_remap_failure=None if remapped is None else float(remapped[3]),
        nvlink_bandwidth_total=nvlink_bytes,
        power_violation_ns=None if power_violation is None else float(power_violation.violationTime),
        thermal_violation_ns=None if thermal_violation is None else float(thermal_violation.violationTime),
        mig=_mig(gpu, mig_handles),
    )
