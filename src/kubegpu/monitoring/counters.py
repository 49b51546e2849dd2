"""The counters file: dcgm-exporter's CSV that chooses which fields are exported.

Owns parsing the file's text (``DCGM field, Prometheus type, help``; ``#``
comments; blank lines; surrounding spaces trimmed, as dcgm-exporter trims
them) into a :class:`CounterSet`, and locating the default file shipped in
this package. The file's type and help win over the field table's, as in
dcgm-exporter. Pure apart from :func:`default_text`, which reads package data;
must not render metrics.

dcgm-exporter 1.x names (``dcgm_sm_clock`` …, its ``etc/1.x-compatibility-metrics.csv``) are
read too: each maps to its DCGM field, and the series keeps the 1.x name, as dcgm-exporter does.

Well-formed DCGM names the exporter cannot read (``DCGM_FI_DEV_FAN_SPEED``,
``DCGM_EXP_XID_ERRORS_COUNT`` …) are not errors: they are returned in
``CounterSet.unsupported`` so the command can warn once and go on, because
a counters file written for dcgm-exporter should still work here.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import resources

from kubegpu.monitoring import fields
from kubegpu.monitoring.errors import MonitoringError

#: Type words dcgm-exporter accepts in a counters file.
TYPES = ("gauge", "counter", "histogram", "summary", "label")
_NAME = re.compile(r"^DCGM_(FI|EXP)_[A-Z0-9_]+$")

#: dcgm-exporter 1.x metric names and the DCGM fields they read (go-dcgm's legacy name table).
OLD_NAMES: dict[str, str] = {
    "dcgm_sm_clock": "DCGM_FI_DEV_SM_CLOCK",
    "dcgm_memory_clock": "DCGM_FI_DEV_MEM_CLOCK",
    "dcgm_memory_temp": "DCGM_FI_DEV_MEMORY_TEMP",
    "dcgm_gpu_temp": "DCGM_FI_DEV_GPU_TEMP",
    "dcgm_power_usage": "DCGM_FI_DEV_POWER_USAGE",
    "dcgm_total_energy_consumption": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "dcgm_pcie_tx_throughput": "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "dcgm_pcie_rx_throughput": "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "dcgm_pcie_replay_counter": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "dcgm_gpu_utilization": "DCGM_FI_DEV_GPU_UTIL",
    "dcgm_mem_copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "dcgm_enc_utilization": "DCGM_FI_DEV_ENC_UTIL",
    "dcgm_dec_utilization": "DCGM_FI_DEV_DEC_UTIL",
    "dcgm_xid_errors": "DCGM_FI_DEV_XID_ERRORS",
    "dcgm_power_violation": "DCGM_FI_DEV_POWER_VIOLATION",
    "dcgm_thermal_violation": "DCGM_FI_DEV_THERMAL_VIOLATION",
    "dcgm_sync_boost_violation": "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
    "dcgm_board_limit_violation": "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    "dcgm_low_util_violation": "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    "dcgm_reliability_violation": "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "dcgm_fb_free": "DCGM_FI_DEV_FB_FREE",
    "dcgm_fb_used": "DCGM_FI_DEV_FB_USED",
    "dcgm_ecc_sbe_volatile_total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "dcgm_ecc_dbe_volatile_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "dcgm_ecc_sbe_aggregate_total": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "dcgm_ecc_dbe_aggregate_total": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "dcgm_retired_pages_sbe": "DCGM_FI_DEV_RETIRED_SBE",
    "dcgm_retired_pages_dbe": "DCGM_FI_DEV_RETIRED_DBE",
    "dcgm_retired_pages_pending": "DCGM_FI_DEV_RETIRED_PENDING",
    "dcgm_nvlink_flit_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_data_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_replay_error_count_total": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_recovery_error_count_total": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_bandwidth_total": "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
}
_OLD_PROF = re.compile(r"^dcgm_fi_prof_[a-z0-9_]+$")


def field_of(name: str) -> str | None:
    """The DCGM field a counters-file name reads: itself, or the field behind a 1.x name; None if neither."""
    if _NAME.match(name):
        return name
    if name in OLD_NAMES:
        return OLD_NAMES[name]
    if _OLD_PROF.match(name):
        return name.upper()
    return None


DEFAULT_FILE_NAME = "default-counters.csv"


class CountersError(MonitoringError, ValueError):
    """A counters file that cannot be used; the message names the file, line and problem."""


@dataclass(frozen=True)
class Counter:
    """One enabled row of a counters file: ``name`` is the series name, ``field`` the DCGM field it reads."""

    name: str
    type: str
    help: str
    line: int
    field: str = ""

    def __post_init__(self) -> None:
        if not self.field:
            object.__setattr__(self, "field", self.name)


@dataclass(frozen=True)
class CounterSet:
    """What a counters file enables: value series, label fields, and rows we cannot serve."""

    values: tuple[Counter, ...]
    labels: tuple[Counter, ...]
    unsupported: tuple[Counter, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.values)


def default_text() -> str:
    """The text of the counters file shipped in this package."""
    return (resources.files("kubegpu.monitoring") / DEFAULT_FILE_NAME).read_text(encoding="utf-8")


def parse(text: str, source: str = "<counters>") -> CounterSet:
    """Parse a counters file; raises :class:`CountersError` naming ``source:line`` on bad input."""
    values: list[Counter] = []
    labels: list[Counter] = []
    unsupported: list[Counter] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), 1):  # not splitlines(): a form feed is not a line end here
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            row = next(csv.reader([line], skipinitialspace=True))
        except csv.Error as exc:
            raise CountersError(f"{where}: not a CSV row: {exc}") from exc
        row = [cell.strip() for cell in row]
        if len(row) != 3:
            raise CountersError(
                f"{where}: expected 3 comma-separated fields 'DCGM field, type, help', got {len(row)} "
                f"(quote a help text that contains commas)"
            )
        name, kind, help_text = row
        field = field_of(name)
        if field is None:
            raise CountersError(
                f"{where}: {name!r} is not a DCGM field name (DCGM_FI_…, DCGM_EXP_… or a 1.x name: dcgm_gpu_temp …)"
            )
        if kind not in TYPES:
            raise CountersError(f"{where}: {name}: unknown metric type {kind!r} (choose from {', '.join(TYPES)})")
        if name in seen:
            raise CountersError(f"{where}: {name} is already enabled on line {seen[name]}")
        seen[name] = number
        counter = Counter(name=name, type=kind, help=help_text, line=number, field=field)
        if kind == "label":
            (labels if field in fields.LABEL_FIELDS else unsupported).append(counter)
        elif field in fields.FIELDS and kind in ("gauge", "counter"):
            values.append(counter)
        else:
            # histogram/summary rows and fields we have no telemetry for are skipped, not fatal.
            unsupported.append(counter)
    return CounterSet(values=tuple(values), labels=tuple(labels), unsupported=tuple(unsupported))
