"""Writing simulation results: the load series as CSV and JSON, and the comparison plot as PNG.

Owns the output formats of ``kubegpu simulate``: one CSV row per run and
arrived-load percent (unallocated GPU %, fragmentation rate and amount), a
JSON document with every run's summary and series, and a two-panel PNG in the
style of the FGD paper's Fig. 9(a) (unallocated GPU vs arrived load, median
over seeds per policy, min–max band) with the fragmentation rate beside it.
Must not run simulations. Matplotlib is imported inside :func:`write_plot`
with the Agg backend, so nothing here needs a display.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubegpu.scheduling.simulate.simulator import RunResult


@dataclass(frozen=True)
class RunSummary:
    """What a run reports: its identity, outcome and timing, plus its series."""

    policy: str
    seed: int
    pods: int
    failed: int
    unallocated_100: float
    unallocated_130: float
    seconds: float
    series: tuple[tuple[int, float, float, float], ...]
    preempted: int = 0

    @classmethod
    def of(cls, result: RunResult, seconds: float) -> RunSummary:
        series = tuple(
            (p.load_pct, p.unallocated_gpu_pct, p.fragmentation_rate_pct, p.fragmentation_amount_pct)
            for p in result.series()
        )
        return cls(
            result.policy,
            result.seed,
            result.pods,
            result.failed,
            result.unallocated_at(100),
            result.unallocated_at(130),
            round(seconds, 3),
            series,
            result.preempted,
        )

    def to_json(self, with_series: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "policy": self.policy,
            "seed": self.seed,
            "pods": self.pods,
            "failed": self.failed,
            "preempted": self.preempted,
            "unallocated_gpu_pct": {"100": _num(self.unallocated_100), "130": _num(self.unallocated_130)},
            "seconds": self.seconds,
        }
        if with_series:
            data["series"] = [
                {
                    "load_pct": load,
                    "unallocated_gpu_pct": _num(unalloc),
                    "fragmentation_rate_pct": _num(rate),
                    "fragmentation_amount_pct": _num(amount),
                }
                for load, unalloc, rate, amount in self.series
            ]
        return data


def _num(value: float) -> float | None:
    return None if value != value else value  # NaN (load never reached) becomes JSON null


def write_series_csv(path: Path, runs: Sequence[RunSummary]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["policy", "seed", "load_pct", "unallocated_gpu_pct", "fragmentation_rate_pct", "fragmentation_amount_pct"]
        )
        for run in runs:
            for load, unalloc, rate, amount in run.series:
                writer.writerow([run.policy, run.seed, load, unalloc, rate, amount])


def write_series_json(path: Path, runs: Sequence[RunSummary], meta: dict[str, Any]) -> None:
    doc = {**meta, "runs": [run.to_json(with_series=True) for run in runs]}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def median_curves(runs: Sequence[RunSummary], column: int) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per policy: (load, median, min, max) over seeds of one series column (1 unallocated, 2 rate, 3 amount)."""
    by_policy: dict[str, dict[int, list[float]]] = {}
    for run in runs:
        points = by_policy.setdefault(run.policy, {})
        for row in run.series:
            value = row[column]
            if value == value:
                points.setdefault(row[0], []).append(value)
    return {
        policy: [(load, statistics.median(v), min(v), max(v)) for load, v in sorted(points.items())]
        for policy, points in by_policy.items()
    }


def write_plot(path: Path, runs: Sequence[RunSummary], title: str) -> None:
    """The Fig. 9(a)-style comparison: unallocated GPU % (zoomed to 75 %+) and fragmentation rate vs load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, column, label, low in ((left, 1, "unallocated GPU (%)", 75), (right, 2, "fragmentation rate (%)", 0)):
        for policy, curve in median_curves(runs, column).items():
            shown = [pt for pt in curve if pt[0] >= low]
            if not shown:
                continue
            xs = [pt[0] for pt in shown]
            (line,) = ax.plot(xs, [pt[1] for pt in shown], label=policy, linewidth=1.6)
            ax.fill_between(xs, [pt[2] for pt in shown], [pt[3] for pt in shown], color=line.get_color(), alpha=0.15)
        ax.set_xlabel("arrived workloads (% of cluster GPU capacity)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    left.set_title("unallocated GPU vs arrived load (median over seeds)")
    right.set_title("share of idle GPU that is fragmented")
    left.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
