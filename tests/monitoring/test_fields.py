"""The DCGM field table agrees with dcgm-exporter's default counters and with the telemetry types."""

from __future__ import annotations

import dataclasses

import pytest

from kubegpu.gpu.telemetry import GpuSample, MigSample
from kubegpu.monitoring import fields
from tests.monitoring.reference import all_counters, enabled_params

GPU_ATTRS = {f.name for f in dataclasses.fields(GpuSample)}
MIG_ATTRS = {f.name for f in dataclasses.fields(MigSample)}


@pytest.mark.parametrize("row", enabled_params())
def test_every_enabled_default_counter_is_served_with_dcgm_exporters_type_and_help(row: dict[str, str]) -> None:
    if row["prom_type"] == "label":
        assert fields.LABEL_FIELDS[row["field"]].help == row["help"]
        return
    field = fields.FIELDS[row["field"]]
    assert (field.type, field.help) == (row["prom_type"], row["help"])


@pytest.mark.parametrize("field", fields.FIELDS.values(), ids=list(fields.FIELDS))
def test_every_field_reads_an_existing_telemetry_attribute(field: fields.Field) -> None:
    assert field.gpu_attr in GPU_ATTRS
    if field.scope is fields.Scope.INSTANCE:
        assert field.mig_attr in MIG_ATTRS
    else:
        assert field.mig_attr is None


def test_commented_reference_rows_we_serve_keep_their_help_text() -> None:
    # The reference lists disabled rows too; where we can serve one, its help must be dcgm-exporter's.
    # (PCIE_TX/RX_BYTES appear twice upstream: the enabled gauge rows win.)
    rows = all_counters()
    enabled_names = {r["field"] for r in rows if r["enabled"] == "yes"}
    for row in rows:
        if row["field"] in fields.FIELDS and row["field"] not in enabled_names:
            assert fields.FIELDS[row["field"]].help == row["help"], row["field"]


def test_whole_gpu_utilisation_is_not_reported_for_mig_devices() -> None:
    assert fields.FIELDS["DCGM_FI_DEV_GPU_UTIL"].scope is fields.Scope.WHOLE_GPU
    assert fields.FIELDS["DCGM_FI_DEV_FB_USED"].scope is fields.Scope.INSTANCE
    assert fields.FIELDS["DCGM_FI_DEV_GPU_TEMP"].scope is fields.Scope.DEVICE
