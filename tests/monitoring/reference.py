"""dcgm-exporter's counters table from ``../shared/reference`` (read inside tests only, so a clean clone collects)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.shared import SHARED, missing, shared_path

REFERENCE = ("reference", "dcgm-default-counters.tsv")


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def all_counters() -> list[dict[str, str]]:
    """Every reference row, enabled or not; skips the calling test when ../shared is absent."""
    return rows(shared_path(*REFERENCE))


def enabled_counters() -> list[dict[str, str]]:
    """The rows dcgm-exporter enables by default; skips the calling test when ../shared is absent."""
    return [r for r in all_counters() if r["enabled"] == "yes"]


def enabled_params() -> list[object]:
    """One parameter set per enabled row for ``parametrize``; one skipped set naming the file when it is absent."""
    reason = missing(*REFERENCE)
    if reason is not None:
        return [pytest.param({}, marks=pytest.mark.skip(reason=reason), id="reference-missing")]
    return [pytest.param(r, id=r["field"]) for r in rows(SHARED.joinpath(*REFERENCE)) if r["enabled"] == "yes"]
