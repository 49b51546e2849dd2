"""Telemetry samples: the per-GPU and per-MIG-device readings a backend reports.

Owns the value types only. Names are neutral (not DCGM field names); the
exporter maps them to dcgm-exporter counters. A field is None when the
backend cannot read it on this device (as NVML answers NOT_SUPPORTED).
Must not do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MigSample:
    """Readings of one MIG device."""

    uuid: str
    parent_uuid: str
    gi_id: int
    ci_id: int
    profile: str
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    fb_total_mib: float | None = None
    gr_engine_active: float | None = None  # ratio 0..1
    sm_active: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None


@dataclass(frozen=True)
class GpuSample:
    """Readings of one physical GPU at one instant.

    Units: percent 0..100 for ``*_util_pct``, ratios 0..1 for ``*_active`` and
    ``sm_occupancy``, MiB for framebuffer, °C, W, mJ for energy since boot, MHz,
    bytes/s for PCIe rates, totals as counts since boot, ns for violation times.
    """

    uuid: str
    index: int
    available: bool = True  # False when the GPU is lost: nothing else is valid then
    gpu_util_pct: float | None = None
    mem_copy_util_pct: float | None = None
    enc_util_pct: float | None = None
    dec_util_pct: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    fb_reserved_mib: float | None = None
    fb_total_mib: float | None = None
    gpu_temp_c: float | None = None
    memory_temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    total_energy_mj: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    pcie_replay_total: float | None = None
    xid_last: int = 0  # value of the last XID seen, 0 when none
    ecc_sbe_volatile_total: float | None = None
    ecc_dbe_volatile_total: float | None = None
    ecc_sbe_aggregate_total: float | None = None
    ecc_dbe_aggregate_total: float | None = None
    retired_pages_sbe: float | None = None
    retired_pages_dbe: float | None = None
    retired_pages_pending: float | None = None
    remapped_rows_correctable: float | None = None
    remapped_rows_uncorrectable: float | None = None
    row_remap_failure: float | None = None
    nvlink_bandwidth_total: float | None = None
    power_violation_ns: float | None = None
    thermal_violation_ns: float | None = None
    gr_engine_active: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    vgpu_license_status: float | None = None
    mig: tuple[MigSample, ...] = ()


@dataclass(frozen=True)
class MachineSample:
    """A sample of every GPU on the machine, taken at ``timestamp`` (Unix seconds)."""

    timestamp: float
    gpus: tuple[GpuSample, ...]
