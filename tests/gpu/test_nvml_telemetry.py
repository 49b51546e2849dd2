"""Telemetry samples read through nvidia-ml-py from the fake libnvidia-ml.so.1."""

from __future__ import annotations

from dataclasses import fields

from kubegpu.gpu.telemetry import GpuSample
from tests.fake_nvml.harness import OpenMachine
from tests.polling import wait_until

pytest_plugins = ["tests.fake_nvml.fixtures"]

#: Readings that need DCGM profiling (or GPM) or vGPU; NVML alone leaves them empty.
PROFILING = {
    "gr_engine_active",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "fp64_active",
    "fp32_active",
    "fp16_active",
    "vgpu_license_status",
}
#: Page retirement is pre-Ampere; Ampere and later remap rows instead.
RETIRED_PAGES = {"retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"}
REMAPPED_ROWS = {"remapped_rows_correctable", "remapped_rows_uncorrectable", "row_remap_failure"}


def empty(sample: GpuSample) -> set[str]:
    return {f.name for f in fields(sample) if getattr(sample, f.name) is None}


def test_an_a100_fills_every_reading_nvml_offers(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("dgx-a100")
    machine = backend.discover()
    sample = backend.sample().gpus[0]
    assert sample.uuid == machine.gpus[0].uuid and sample.available
    assert empty(sample) == PROFILING | RETIRED_PAGES
    assert sample.fb_total_mib == machine.gpus[0].memory_mib
    assert sample.fb_used_mib is not None and sample.fb_free_mib is not None and sample.fb_reserved_mib is not None
    assert sample.fb_used_mib + sample.fb_free_mib + sample.fb_reserved_mib == sample.fb_total_mib
    assert sample.power_limit_w == 400.0
    assert sample.power_w is not None and 0 < sample.power_w <= sample.power_limit_w
    assert sample.gpu_util_pct is not None and 0 <= sample.gpu_util_pct <= 100
    assert sample.mem_clock_mhz == machine.gpus[0].max_mem_clock_mhz
    assert sample.sm_clock_mhz is not None and 0 < sample.sm_clock_mhz <= machine.gpus[0].max_sm_clock_mhz
    assert sample.nvlink_bandwidth_total is not None and sample.nvlink_bandwidth_total > 0
    assert (sample.ecc_dbe_volatile_total, sample.remapped_rows_uncorrectable, sample.xid_last) == (0.0, 0.0, 0)


def test_a_v100_reports_retired_pages_instead_of_remapped_rows(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("dgx1-v100")
    sample = backend.sample().gpus[3]
    assert empty(sample) == PROFILING | REMAPPED_ROWS
    assert (sample.retired_pages_sbe, sample.retired_pages_dbe, sample.retired_pages_pending) == (0.0, 0.0, 0.0)


def test_a_t4_has_neither_memory_temperature_nor_nvlink(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("pcie-4xt4")
    sample = backend.sample().gpus[0]
    assert empty(sample) == PROFILING | REMAPPED_ROWS | {"memory_temp_c", "nvlink_bandwidth_total"}


def test_a_mig_enabled_gpu_has_no_utilisation_but_each_mig_device_reports_its_memory(
    nvml_machine: OpenMachine,
) -> None:
    _, backend = nvml_machine("a100-mig")
    machine = backend.discover()
    gpus = backend.sample().gpus
    whole, split = gpus[0], gpus[4]
    assert whole.gpu_util_pct is not None and whole.mig == ()
    assert split.gpu_util_pct is None and split.enc_util_pct is None and split.fb_total_mib == 81920
    assert [(m.uuid, m.profile, m.gi_id, m.fb_total_mib) for m in split.mig] == [
        (d.uuid, d.profile, d.gi_id, float(d.memory_mib)) for d in machine.gpus[4].mig_devices
    ]
    for mig in split.mig:
        assert mig.fb_used_mib is not None and mig.fb_free_mib is not None
        assert mig.fb_used_mib + mig.fb_free_mib == mig.fb_total_mib


def test_injected_ecc_errors_count_in_totals_and_remapped_rows(nvml_machine: OpenMachine) -> None:
    node, backend = nvml_machine("hgx-h200")
    backend.discover()
    node.ecc(2, double_bit=True)
    node.ecc(2, double_bit=True)
    node.ecc(2, double_bit=False)
    sample = backend.sample().gpus[2]
    assert (sample.ecc_dbe_volatile_total, sample.ecc_dbe_aggregate_total, sample.ecc_sbe_volatile_total) == (
        2.0,
        2.0,
        1.0,
    )
    assert (sample.remapped_rows_uncorrectable, sample.remapped_rows_correctable) == (2.0, 1.0)
    assert backend.sample().gpus[1].ecc_dbe_volatile_total == 0.0


def test_the_last_xid_seen_by_the_event_thread_is_in_the_sample(nvml_machine: OpenMachine) -> None:
    node, backend = nvml_machine("dgx-a100")
    assert backend.sample().gpus[2].xid_last == 0  # the first sample starts the event thread
    node.xid(2, 48)
    node.xid(2, 79)
    wait_until(lambda: backend.sample().gpus[2].xid_last == 79)
    assert backend.sample().gpus[1].xid_last == 0


def test_a_lost_gpu_samples_as_unavailable_and_the_rest_as_usual(nvml_machine: OpenMachine) -> None:
    node, backend = nvml_machine("dgx-a100")
    backend.discover()
    node.lost(5)
    gpus = backend.sample().gpus
    assert not gpus[5].available and gpus[5].gpu_util_pct is None and gpus[5].fb_used_mib is None
    assert all(g.available for g in gpus if g.index != 5)
    node.recover(5)
    assert backend.sample().gpus[5].available


def test_energy_since_boot_only_grows(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("pcie-4xt4")
    first = backend.sample()
    second = wait_until(
        lambda: (s := backend.sample()).timestamp > first.timestamp and s, what="a later sample", interval=0.05
    )
    assert second.timestamp > first.timestamp
    before, after = first.gpus[0].total_energy_mj, second.gpus[0].total_energy_mj
    assert before is not None and after is not None and after > before > 0
