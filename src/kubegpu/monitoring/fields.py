"""The DCGM field table: which dcgm-exporter counter reads which telemetry value.

Owns, for every DCGM field the exporter can serve, its Prometheus type and
help text (dcgm-exporter's, word for word), the :mod:`kubegpu.gpu.telemetry`
attribute it reads, and its scope on MIG devices; and the label fields (type
``label`` in a counters file) with the machine fact each one reads.
Pure data and lookups: no I/O, no rendering, no knowledge of pods.

Scope decides what a MIG device's series carries, mirroring what DCGM reports
for a GPU-instance entity:

* ``INSTANCE``: the MIG device's own value (framebuffer, DCP activity ratios);
* ``DEVICE``: the parent GPU's value, repeated on each of its MIG devices
  (clocks, temperatures, power, energy, PCIe, XID, ECC, row remapping, NVLink);
* ``WHOLE_GPU``: only meaningful for a whole GPU; NVML does not report it in
  MIG mode, so MIG devices get no series (utilisation rates, reserved memory).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kubegpu.gpu.model import Gpu, Machine

MetricType = Literal["gauge", "counter"]


class Scope(enum.Enum):
    """Where a field's value comes from on a MIG device (see the module docstring)."""

    INSTANCE = "instance"
    DEVICE = "device"
    WHOLE_GPU = "whole-gpu"


@dataclass(frozen=True)
class Field:
    """One DCGM value field served as a Prometheus series.

    ``gpu_attr`` names a :class:`~kubegpu.gpu.telemetry.GpuSample` attribute and
    ``mig_attr`` a :class:`~kubegpu.gpu.telemetry.MigSample` attribute (only for
    ``Scope.INSTANCE``).
    """

    name: str
    type: MetricType
    help: str
    gpu_attr: str
    scope: Scope
    mig_attr: str | None = None


@dataclass(frozen=True)
class LabelField:
    """A DCGM field of type ``label``: its value becomes a label on every series of a GPU."""

    name: str
    help: str
    value: Callable[[Machine, Gpu], str]


def _f(name: str, kind: MetricType, help_text: str, attr: str, scope: Scope, mig_attr: str | None = None) -> Field:
    return Field(name, kind, help_text, attr, scope, mig_attr)


_D, _I, _W = Scope.DEVICE, Scope.INSTANCE, Scope.WHOLE_GPU

#: Every value field the exporter can serve, by DCGM name. Help texts are dcgm-exporter's.
FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        _f("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz", _D),
        _f("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock_mhz", _D),
        _f("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "memory_temp_c", _D),
        _f("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "gpu_temp_c", _D),
        _f("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w", _D),
        _f("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).", "power_limit_w", _D),
        _f(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            "total_energy_mj",
            _D,
        ),
        _f("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replay_total", _D),
        _f("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpu_util_pct", _W),
        _f("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_copy_util_pct", _W),
        _f("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", "enc_util_pct", _W),
        _f("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", "dec_util_pct", _W),
        _f("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "xid_last", _D),
        _f(
            "DCGM_FI_DEV_POWER_VIOLATION",
            "counter",
            "Throttling duration due to power constraints (in ns).",
            "power_violation_ns",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_THERMAL_VIOLATION",
            "counter",
            "Throttling duration due to thermal constraints (in ns).",
            "thermal_violation_ns",
            _D,
        ),
        _f("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free_mib", _I, "fb_free_mib"),
        _f("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used_mib", _I, "fb_used_mib"),
        _f("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", "fb_reserved_mib", _W),
        _f("DCGM_FI_DEV_FB_TOTAL", "gauge", "Total framebuffer memory (in MiB).", "fb_total_mib", _I, "fb_total_mib"),
        _f(
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "counter",
            "Total number of single-bit volatile ECC errors.",
            "ecc_sbe_volatile_total",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "counter",
            "Total number of double-bit volatile ECC errors.",
            "ecc_dbe_volatile_total",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
            "counter",
            "Total number of single-bit persistent ECC errors.",
            "ecc_sbe_aggregate_total",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
            "counter",
            "Total number of double-bit persistent ECC errors.",
            "ecc_dbe_aggregate_total",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_RETIRED_SBE",
            "counter",
            "Total number of retired pages due to single-bit errors.",
            "retired_pages_sbe",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_RETIRED_DBE",
            "counter",
            "Total number of retired pages due to double-bit errors.",
            "retired_pages_dbe",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_RETIRED_PENDING",
            "counter",
            "Total number of pages pending retirement.",
            "retired_pages_pending",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "counter",
            "Total number of NVLink bandwidth counters for all lanes.",
            "nvlink_bandwidth_total",
            _D,
        ),
        _f("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", "vgpu_license_status", _D),
        _f(
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Number of remapped rows for uncorrectable errors",
            "remapped_rows_uncorrectable",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Number of remapped rows for correctable errors",
            "remapped_rows_correctable",
            _D,
        ),
        _f(
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "gauge",
            "Whether remapping of rows has failed",
            "row_remap_failure",
            _D,
        ),
        _f(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gauge",
            "Ratio of time the graphics engine is active.",
            "gr_engine_active",
            _I,
            "gr_engine_active",
        ),
        _f(
            "DCGM_FI_PROF_SM_ACTIVE",
            "gauge",
            "The ratio of cycles an SM has at least 1 warp assigned.",
            "sm_active",
            _I,
            "sm_active",
        ),
        _f(
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "gauge",
            "The ratio of number of warps resident on an SM.",
            "sm_occupancy",
            _W,
        ),
        _f(
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "gauge",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
            "tensor_active",
            _I,
            "tensor_active",
        ),
        _f(
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            "dram_active",
            _I,
            "dram_active",
        ),
        _f("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active.", "fp64_active", _W),
        _f("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active.", "fp32_active", _W),
        _f("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active.", "fp16_active", _W),
        _f(
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "gauge",
            "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads "
            "- in bytes per second.",
            "pcie_tx_bytes_per_s",
            _D,
        ),
        _f(
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "gauge",
            "The rate of data received over the PCIe bus - including both protocol headers and data payloads "
            "- in bytes per second.",
            "pcie_rx_bytes_per_s",
            _D,
        ),
    )
}

#: DCGM fields of type ``label`` the exporter can fill, by DCGM name.
LABEL_FIELDS: dict[str, LabelField] = {
    f.name: f
    for f in (
        LabelField("DCGM_FI_DRIVER_VERSION", "Driver Version", lambda machine, gpu: machine.driver_version),
        LabelField("DCGM_FI_DEV_SERIAL", "Device Serial Number", lambda machine, gpu: gpu.serial),
        LabelField("DCGM_FI_DEV_VBIOS_VERSION", "VBIOS version of the device", lambda machine, gpu: gpu.vbios_version),
    )
}


def known(name: str) -> bool:
    """True when the exporter can serve DCGM field ``name`` (as a series or as a label)."""
    return name in FIELDS or name in LABEL_FIELDS
