"""The counters file: dcgm-exporter's CSV that chooses which fields are exported.

Owns parsing the file's text (``DCGM field, Prometheus type, help``; ``#``
comments; blank lines; surrounding spaces trimmed, as dcgm-exporter trims
them) into a :class:`CounterSet`, and locating the default file shipped in
this package. The file's type and help win over the field table's, as in
dcgm-exporter. Pure apart from :func:`default_text`, which reads package data;
must not render metrics.

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

DEFAULT_FILE_NAME = "default-counters.csv"


class CountersError(MonitoringError, ValueError):
    """A counters file that cannot be used; the message names the file, line and problem."""


@dataclass(frozen=True)
class Counter:
    """One enabled row of a counters file."""

    name: str
    type: str
    help: str
    line: int


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
        if not _NAME.match(name):
            raise CountersError(f"{where}: {name!r} is not a DCGM field name (DCGM_FI_… or DCGM_EXP_…)")
        if kind not in TYPES:
            raise CountersError(f"{where}: {name}: unknown metric type {kind!r} (choose from {', '.join(TYPES)})")
        if name in seen:
            raise CountersError(f"{where}: {name} is already enabled on line {seen[name]}")
        seen[name] = number
        counter = Counter(name=name, type=kind, help=help_text, line=number)
        if kind == "label":
            (labels if name in fields.LABEL_FIELDS else unsupported).append(counter)
        elif name in fields.FIELDS and kind in ("gauge", "counter"):
            values.append(counter)
        else:
            # histogram/summary rows and fields we have no telemetry for are skipped, not fatal.
            unsupported.append(counter)
    return CounterSet(values=tuple(values), labels=tuple(labels), unsupported=tuple(unsupported))
