"""Outputs: the series as CSV and JSON, and the comparison plot as a real PNG."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from kubegpu.scheduling.simulate.report import (
    RunSummary,
    median_curves,
    write_plot,
    write_series_csv,
    write_series_json,
)
from kubegpu.scheduling.simulate.simulator import simulate
from kubegpu.scheduling.simulate.synthetic import synthetic_nodes, synthetic_pods


def runs() -> list[RunSummary]:
    nodes, pods = synthetic_nodes(0.05), synthetic_pods(0.05)
    return [RunSummary.of(simulate(nodes, pods, p, s), 0.5) for p in ("fgd", "random") for s in (1, 2)]


def test_series_files_and_plot_are_written(tmp_path: Path) -> None:
    summaries = runs()
    write_series_csv(tmp_path / "s.csv", summaries)
    write_series_json(tmp_path / "s.json", summaries, {"source": "synthetic"})
    write_plot(tmp_path / "s.png", summaries, "test")
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert {r["policy"] for r in rows} == {"fgd", "random"}
    assert {"load_pct", "unallocated_gpu_pct", "fragmentation_rate_pct", "fragmentation_amount_pct"} <= set(rows[0])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["source"] == "synthetic" and len(doc["runs"]) == 4
    first = doc["runs"][0]
    assert set(first["unallocated_gpu_pct"]) == {"100", "130"} and first["series"][0]["load_pct"] == 0
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_median_curve_spans_the_seeds() -> None:
    curves = median_curves(runs(), column=1)
    load, median, low, high = curves["fgd"][-1]
    assert low <= median <= high and load >= 100
