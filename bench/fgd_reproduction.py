"""Reproduce the FGD paper's unallocated-GPU results on the shared Alibaba traces, and show where our policy lands.

For every trace and policy: the median over seeds 42–51 of the unallocated GPU
share (%) when the arrived workload reaches 100 % (and 130 %) of cluster GPU
capacity, next to the paper's value (medians the reference derived from the
authors' cached results). Prints one plain line per trace and policy, then a
summary. Runs in parallel worker processes.

    python bench/fgd_reproduction.py                       # all nine shared traces, 10 seeds (~25 min on 2 cores)
    python bench/fgd_reproduction.py --traces default --seeds 42-44
    python bench/fgd_reproduction.py --traces default --policies fgd --bound      # what packing allows at 100 %
    python bench/fgd_reproduction.py --traces default --policies lookahead --reserve 0.1,0.2,0.3
    python bench/fgd_reproduction.py --variants --draws 3              # FGD vs ours on shared traces + variants
    python bench/fgd_reproduction.py --variants --policies fgd --save runs.jsonl     # FGD alone, runs kept
    python bench/fgd_reproduction.py --variants --reuse runs.jsonl --save runs.jsonl # only what runs.jsonl lacks
    python bench/fgd_reproduction.py --variants --traces default --only multigpu30,gpuspec34 --seeds 42-46 --json

``--variants`` runs ``fgd`` and ``lookahead`` on the shared traces named by
``--traces`` and on the multi-GPU and model-constrained variants that
``bench/trace_variants.py`` builds (draws 0..N-1 of each), and prints one row
per trace or variant draw: the medians over the seeds at 100 % and 130 %
arrived load for both, the paper's FGD value where the paper has the row, the
load point in 70–130 % where ours is furthest above FGD (the difference of
the medians at that point), and the share of multi-GPU pods that failed by
100 % load (median) for both.

``--save FILE`` appends each run's curve to FILE as a JSON line and
``--reuse FILE`` takes the runs FILE holds instead of running them (valid
only while the saved policy's code is unchanged); runs go seed by seed, so an
interrupted run holds every row for its first seeds.

Issue 14's final evaluation (fifth round, both of its changes), ``--variants
--traces all --draws 3 --seeds 42-51`` (860 runs: FGD's 430 in about 6 min with
``--policies fgd --save``, ours 430 in 34 min with 2 processes on a 2-core
machine): 42 of 43 rows meet the target. The one that does not is
multigpu40@1, on the multi-GPU failure rate alone: its median over the seeds
is 3.38 % against FGD's 3.35 %. Seed by seed, ours fails more multi-GPU pods
than FGD in one seed of ten (seed 50, one 8-GPU pod at 96.9 % load), fewer in
three and the same in six; the mean is 3.43 % against 3.51 %. A ``not met``
line prints that reading for any such row. Draws 3-7 (``--traces ""
--first-draw 3 --draws 8 --seeds 42-51``, never used to choose; closest point
multigpu50@6, +0.07 at 96 %) meet it on all 45 rows, so 87 of 88 rows in all.
The shared lists and draws 0-2:

    trace           FGD@100  paper  ours@100  FGD@130  ours@130 worst load  ours-FGD  ok  multi-GPU failed FGD/ours
    cpu0               5.12      -      4.06     4.91      3.95        70 %     +0.00 yes          8.0 % /   6.4 %
    cpu037             4.84      -      4.29     4.66      4.17        70 %     +0.00 yes          5.3 % /   4.5 %
    cpu050             5.09   5.00      4.31     4.93      4.16        70 %     +0.00 yes          5.9 % /   4.6 %
    cpu072             4.79      -      3.90     4.61      3.80        70 %     +0.00 yes          4.0 % /   3.9 %
    cpu100             4.83   4.79      3.89     4.67      3.81        70 %     +0.00 yes          4.0 % /   3.9 %
    cpu200             5.20   5.18      4.04     4.98      3.95        70 %     +0.00 yes          5.2 % /   3.8 %
    cpu235             5.97      -      4.31     5.76      4.16        70 %     +0.00 yes          5.3 % /   2.6 %
    cpu250             6.86   6.80      5.42     6.62      5.22        70 %     +0.00 yes          9.0 % /   6.5 %
    cpu300            13.94      -     13.78    13.72     13.57        70 %     +0.00 yes         18.9 % /  16.1 %
    default            4.66   4.77      3.89     4.51      3.81        70 %     +0.00 yes          4.6 % /   3.9 %
    gpushare100       13.32  13.36     12.04    13.07     11.82        70 %     +0.00 yes          0.0 % /   0.0 %
    gpushare20         3.56      -      2.88     3.42      2.81        70 %     +0.00 yes          5.9 % /   3.6 %
    gpushare40         5.99   6.05      5.25     5.84      5.15        70 %     +0.00 yes          7.1 % /   5.8 %
    gpushare60         8.73   8.70      7.81     8.58      7.67        70 %     +0.00 yes          6.8 % /   5.6 %
    gpushare80        10.96  10.91      9.80    10.72      9.60        70 %     +0.00 yes         13.8 % /  13.8 %
    gpuspec05          4.83      -      3.94     4.69      3.84        93 %     +0.08 yes          5.3 % /   3.9 %
    multigpu20@0       4.36   4.47      3.58     4.21      3.48        70 %     +0.00 yes          4.0 % /   3.2 %
    multigpu20@1       4.40   4.47      3.56     4.27      3.49        70 %     +0.00 yes          4.5 % /   3.2 %
    multigpu20@2       4.54   4.47      3.66     4.40      3.56        70 %     +0.00 yes          4.9 % /   3.4 %
    multigpu30@0       3.76   3.61      3.54     3.67      3.42        70 %     +0.00 yes          4.2 % /   4.1 %
    multigpu30@1       3.74   3.61      3.56     3.62      3.46        70 %     +0.00 yes          3.7 % /   3.4 %
    multigpu30@2       3.66   3.61      3.52     3.56      3.40        70 %     +0.00 yes          4.0 % /   3.7 %
    multigpu40@0       3.28   3.10      3.12     3.20      3.02        70 %     +0.00 yes          3.3 % /   3.0 %
    multigpu40@1       3.12   3.10      3.08     3.05      3.01        70 %     +0.00  NO          3.3 % /   3.4 %
    multigpu40@2       3.30   3.10      3.12     3.21      3.02        70 %     +0.00 yes          3.2 % /   2.8 %
    multigpu50@0       2.91   2.91      2.65     2.84      2.58        70 %     +0.00 yes          2.9 % /   2.4 %
    multigpu50@1       2.65   2.91      2.59     2.57      2.50        70 %     +0.00 yes          2.6 % /   2.5 %
    multigpu50@2       2.75   2.91      2.58     2.65      2.46        70 %     +0.00 yes          2.8 % /   2.5 %
    gpuspec05@0        4.92      -      3.92     4.75      3.83        78 %     +0.03 yes          5.3 % /   4.6 %
    gpuspec05@1        4.84      -      3.85     4.64      3.76        71 %     -0.00 yes          4.6 % /   3.9 %
    gpuspec05@2        4.84      -      3.90     4.67      3.81        94 %     +0.01 yes          5.2 % /   3.9 %
    gpuspec10@0        5.00   5.30      4.12     4.85      3.98       116 %     -0.84 yes          8.6 % /   3.9 %
    gpuspec10@1        5.01   5.30      4.08     4.85      3.97       128 %     -0.87 yes         13.9 % /   3.9 %
    gpuspec10@2        5.19   5.30      4.01     5.00      3.88       127 %     -1.11 yes         13.3 % /   3.3 %
    gpuspec20@0        5.41   5.31      4.12     5.15      4.00       130 %     -1.15 yes         22.7 % /   5.3 %
    gpuspec20@1        5.29   5.31      4.05     5.04      3.93       128 %     -1.11 yes         21.9 % /   7.8 %
    gpuspec20@2        5.28   5.31      4.22     5.04      4.08       130 %     -0.96 yes         19.1 % /   8.5 %
    gpuspec25@0        6.27   6.08      4.12     5.24      4.00       130 %     -1.24 yes         21.4 % /   7.2 %
    gpuspec25@1        6.53   6.08      4.18     5.28      4.05       130 %     -1.23 yes         24.8 % /   7.3 %
    gpuspec25@2        6.44   6.08      4.12     5.28      3.96       122 %     -1.31 yes         20.5 % /   7.2 %
    gpuspec34@0       12.57  12.12      6.51     5.28      4.11       130 %     -1.17 yes         21.1 % /   5.3 %
    gpuspec34@1       12.69  12.12      6.96     5.29      4.18       128 %     -1.10 yes         23.0 % /   5.3 %
    gpuspec34@2       12.71  12.12      7.00     5.31      4.13       124 %     -1.17 yes         20.9 % /   5.3 %
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from kubegpu.scheduling.core.cluster import BoolArray, ClusterState
from kubegpu.scheduling.core.framework import FilterPlugin, Profile
from kubegpu.scheduling.core.gaps import GapTables
from kubegpu.scheduling.core.model import MILLI, NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import POLICIES as REGISTRY
from kubegpu.scheduling.core.policies import PolicyInfo, PolicyOptions, build_profile
from kubegpu.scheduling.core.workload import TargetWorkload
from kubegpu.scheduling.simulate.simulator import prepare_workload, simulate
from kubegpu.scheduling.simulate.trace import read_nodes, read_pods

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_variants import VARIANTS, build

TRACE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "alibaba-gpu-v2023"
POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd", "lookahead")
# Reference tables 1.7(a) and (b): unallocated GPU % at 100 % and 130 % arrived load, medians of 10 seeds.
# Column order: Random, DotProd, Clustering, Packing, BestFit, FGD.
PAPER_100 = {
    "default": (13.75, 9.45, 8.42, 8.20, 7.09, 4.77),
    "cpu050": (11.02, 6.94, 6.52, 6.47, 6.42, 5.00),
    "cpu100": (12.56, 8.22, 7.46, 7.45, 6.72, 4.79),
    "cpu200": (17.01, 12.24, 10.25, 9.87, 7.85, 5.18),
    "cpu250": (20.06, 16.22, 12.48, 11.92, 8.70, 6.80),
    "gpushare40": (15.04, 10.66, 10.18, 10.19, 8.53, 6.05),
    "gpushare60": (17.22, 13.17, 13.03, 12.75, 10.91, 8.70),
    "gpushare80": (19.35, 15.89, 15.45, 15.28, 13.27, 10.91),
    "gpushare100": (21.07, 17.93, 17.70, 17.78, 15.40, 13.36),
}
PAPER_130 = {
    "default": (12.62, 9.20, 8.21, 7.94, 6.89, 4.60),
    "cpu050": (8.84, 6.71, 6.21, 6.21, 6.18, 4.80),
    "cpu100": (10.83, 7.98, 7.19, 7.19, 6.54, 4.66),
    "cpu200": (16.30, 11.99, 9.98, 9.62, 7.58, 4.92),
    "cpu250": (19.70, 15.96, 12.26, 11.69, 8.50, 6.59),
    "gpushare40": (13.97, 10.42, 9.94, 9.93, 8.27, 5.86),
    "gpushare60": (16.35, 12.83, 12.77, 12.48, 10.65, 8.59),
    "gpushare80": (18.75, 15.53, 15.08, 14.94, 12.94, 10.69),
    "gpushare100": (20.53, 17.53, 17.30, 17.36, 14.99, 13.09),
}
TOLERANCE = 0.5
# The paper's FGD medians (tables 1.7a/b) for the released variant lists our generated variants stand in for.
PAPER_FGD_VARIANTS = {
    "multigpu20": (4.47, 4.35),
    "multigpu30": (3.61, 3.52),
    "multigpu40": (3.10, 3.00),
    "multigpu50": (2.91, 2.83),
    "gpuspec10": (5.30, 5.06),
    "gpuspec20": (5.31, 5.14),
    "gpuspec25": (6.08, 5.20),
    "gpuspec34": (12.12, 5.44),  # the paper's gpuspec33 (33.8 % constrained)
}
LOADS = range(70, 131)
WITHIN = 0.1  # the issue's "at least as good as FGD": ours ≤ FGD + 0.1 point at every load point

_LOADED: dict[str, tuple[list[NodeSpec], list[PodSpec]]] = {}


def _trace(name: str) -> tuple[list[NodeSpec], list[PodSpec]]:
    if name not in _LOADED:
        _LOADED[name] = (
            read_nodes(TRACE_DIR / "openb_node_list_gpu_node.csv"),
            build(name) if "@" in name else read_pods(TRACE_DIR / f"openb_pod_list_{name}.csv"),
        )
    return _LOADED[name]


def _run_curve(job: tuple[str, str, int]) -> tuple[str, str, int, list[float], float]:
    """One run: unallocated GPU % at each load point 70–130, and the share of multi-GPU pods failed by 100 %."""
    trace, policy, seed = job
    nodes, pods = _trace(trace)
    result = simulate(nodes, pods, policy, seed)
    order = prepare_workload(pods, result.total_gpu_milli, np.random.default_rng(seed))
    by_full = result.arrived_milli <= result.total_gpu_milli
    multi = np.array([p.num_gpu >= 2 for p in order]) & by_full
    failed = float((~result.placed[multi]).mean()) if multi.any() else 0.0
    return trace, policy, seed, [result.unallocated_at(load) for load in LOADS], failed


def _load_runs(path: Path) -> dict[tuple[str, str, int], tuple[list[float], float]]:
    """Runs saved by ``--save`` (one JSON object a line), by (trace, policy, seed); the last of duplicates wins."""
    runs: dict[tuple[str, str, int], tuple[list[float], float]] = {}
    if not path.exists():
        return runs
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            run = json.loads(line)
            runs[(run["trace"], run["policy"], run["seed"])] = (run["curve"], run["failed"])
    return runs


def _failure_reading(
    fgd: dict[int, tuple[list[float], float]], ours: dict[int, tuple[list[float], float]], medians: dict[str, float]
) -> str:
    """Why the multi-GPU failure median is above FGD's: the medians (as the table has them), seed by seed, and
    the mean over the seeds."""
    seeds = sorted(fgd.keys() & ours.keys())
    worse = sum(ours[s][1] > fgd[s][1] for s in seeds)
    better = sum(ours[s][1] < fgd[s][1] for s in seeds)
    mean_fgd = statistics.mean(fgd[s][1] for s in seeds)
    mean_ours = statistics.mean(ours[s][1] for s in seeds)
    return (
        f"multi-GPU failed {100 * medians['lookahead']:.2f} % against FGD's {100 * medians['fgd']:.2f} % (median); "
        f"per seed ours worse in {worse}, better in {better}, equal in {len(seeds) - worse - better} of {len(seeds)}; "
        f"mean {100 * mean_ours:.2f} % against {100 * mean_fgd:.2f} %"
    )


def _variant_table(args: argparse.Namespace, traces: list[str]) -> int:
    rows = traces + [f"{v}@{d}" for v in args.only for d in range(args.first_draw, args.draws)]
    compared = [p for p in ("fgd", "lookahead") if p in args.policies.split(",")]
    # Seed by seed, so that an interrupted --save run holds every row for its first seeds.
    jobs = [(t, p, s) for s in args.seeds for t in rows for p in compared]
    saved = _load_runs(args.reuse) if args.reuse else {}
    todo = [job for job in jobs if job not in saved]
    started = time.perf_counter()
    runs: dict[tuple[str, str], dict[int, tuple[list[float], float]]] = {}
    for (trace, policy, seed), run in saved.items():
        if (trace, policy, seed) in jobs:
            runs.setdefault((trace, policy), {})[seed] = run
    with ProcessPoolExecutor(args.jobs) as pool:
        for trace, policy, seed, curve, failed in pool.map(_run_curve, todo, chunksize=1):
            runs.setdefault((trace, policy), {})[seed] = (curve, failed)
            if args.save:
                record = {"trace": trace, "policy": policy, "seed": seed, "curve": curve, "failed": failed}
                with open(args.save, "a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
    print(
        f"runs: {len(jobs)} ({len(rows)} traces x {len(compared)} policies x {len(args.seeds)} seeds), "
        f"{len(todo)} run in {time.perf_counter() - started:.0f} s with {args.jobs} processes"
        + (f", {len(jobs) - len(todo)} read from {args.reuse}" if args.reuse else "")
    )
    if compared != ["fgd", "lookahead"]:
        return 0
    print(f"metric: median over seeds {args.seeds[0]}-{args.seeds[-1]} of unallocated GPU % at each arrived load")
    print()
    header = (
        f"{'trace':<14} {'FGD@100':>8} {'paper':>6} {'ours@100':>9} {'FGD@130':>8} {'ours@130':>9} "
        f"{'worst load':>10} {'ours-FGD':>9} {'ok':>3} {'multi-GPU failed FGD/ours':>26}"
    )
    print(header)
    print("-" * len(header))
    misses: list[str] = []
    table = []
    for trace in rows:
        med = {
            policy: [statistics.median(c[i] for c, _ in runs[(trace, policy)].values()) for i in range(len(LOADS))]
            for policy in ("fgd", "lookahead")
        }
        fails = {
            policy: statistics.median(f for _, f in runs[(trace, policy)].values()) for policy in ("fgd", "lookahead")
        }
        diff = [o - f for o, f in zip(med["lookahead"], med["fgd"], strict=True)]
        worst = max(range(len(LOADS)), key=lambda i: diff[i])
        at100, at130 = LOADS.index(100), LOADS.index(130)
        why = []
        if diff[worst] > WITHIN:
            why.append(f"{diff[worst]:+.2f} at {LOADS[worst]} %")
        if fails["lookahead"] > fails["fgd"]:
            why.append(_failure_reading(runs[(trace, "fgd")], runs[(trace, "lookahead")], fails))
        if trace in traces and med["lookahead"][at100] >= med["fgd"][at100]:
            why.append(f"{med['lookahead'][at100]:.2f} against FGD's {med['fgd'][at100]:.2f} at 100 %")
        ok = not why
        if not ok:
            misses.append(f"{trace}: {'; '.join(why)}")
        paper = PAPER_FGD_VARIANTS.get(trace.partition("@")[0], (*PAPER_100.get(trace, (None,) * 6)[5:6], None))
        paper_text = f"{paper[0]:.2f}" if paper[0] is not None else "-"
        print(
            f"{trace:<14} {med['fgd'][at100]:>8.2f} {paper_text:>6} {med['lookahead'][at100]:>9.2f} "
            f"{med['fgd'][at130]:>8.2f} {med['lookahead'][at130]:>9.2f} {LOADS[worst]:>9} % {diff[worst]:>+9.2f} "
            f"{'yes' if ok else 'NO':>3} {100 * fails['fgd']:>12.1f} % / {100 * fails['lookahead']:>5.1f} %"
        )
        table.append(
            {
                "trace": trace,
                "fgd": {"100": med["fgd"][at100], "130": med["fgd"][at130], "multi_gpu_failed": fails["fgd"]},
                "lookahead": {
                    "100": med["lookahead"][at100],
                    "130": med["lookahead"][at130],
                    "multi_gpu_failed": fails["lookahead"],
                },
                "worst_load": LOADS[worst],
                "worst_diff": diff[worst],
                "ok": ok,
                "not_met": why,
            }
        )
    print()
    print(
        f"ours <= FGD + {WITHIN} at every load 70-130 % and multi-GPU failures <= FGD's "
        f"(and ours < FGD at 100 % on shared traces): {len(rows) - len(misses)} of {len(rows)} rows"
    )
    for miss in misses:
        print(f"  not met: {miss}")
    if args.json:
        print(json.dumps({"seeds": args.seeds, "rows": table}))
    return 0


class FreshGpuReserve(FilterPlugin):
    """Experiment only: below ``share`` fully free GPUs, pods that would strand most of a fresh GPU's rest stay off."""

    name = "FreshGpuReserve"

    def __init__(self, share: float, gaps: GapTables) -> None:
        self.share = share
        self.gaps = gaps

    def filter(self, state: ClusterState, pod: PodSpec) -> BoolArray:
        everywhere = np.ones(state.size, dtype=np.bool_)
        if not pod.is_fractional:
            return everywhere
        rest = MILLI - pod.gpu_milli
        if self.gaps.stranded[rest] <= rest / 2:
            return everywhere
        fresh = state.gpu_free == MILLI
        if fresh.sum() >= self.share * state.gpu_count.sum():
            return everywhere
        used: BoolArray = ((state.gpu_free >= pod.gpu_milli) & ~fresh).any(axis=1)
        return used


def _register_reserve(policy: str) -> None:
    """Make ``lookahead+reserve<share>`` a policy name in this process (idempotent)."""
    if policy in REGISTRY or not policy.startswith("lookahead+reserve"):
        return
    share = float(policy.removeprefix("lookahead+reserve"))

    def build(
        state: ClusterState,
        target: TargetWorkload,
        pods: Sequence[PodSpec],
        rng: np.random.Generator,
        options: PolicyOptions,
    ) -> Profile:
        inner = build_profile("lookahead", state, target, pods, rng, options)
        gate = FreshGpuReserve(share, GapTables.from_pods(pods))
        return Profile(policy, (*inner.filters, gate), inner.scorers, inner.picker, inner.description)

    REGISTRY[policy] = PolicyInfo(policy, "experiment: lookahead keeping 0.81-like pods off the last fresh GPUs", build)


def _run(job: tuple[str, str, int]) -> tuple[str, str, int, float, float, int]:
    trace, policy, seed = job
    _register_reserve(policy)
    nodes, pods = _trace(trace)
    result = simulate(nodes, pods, policy, seed)
    return trace, policy, seed, result.unallocated_at(100), result.unallocated_at(130), result.failed


def _arrivals(trace: str, seed: int) -> tuple[int, list[tuple[float, int]]]:
    """Capacity, and (arrived load %, per-GPU milli) of each fractional pod arriving by 100 % load, in order."""
    nodes, pods = _trace(trace)
    capacity = MILLI * sum(n.gpus for n in nodes)
    arrived, items = 0, []
    for pod in prepare_workload(pods, capacity, np.random.default_rng(seed)):
        arrived += pod.total_gpu_milli
        if pod.is_fractional:
            items.append((100 * arrived / capacity, pod.gpu_milli))
        if arrived >= capacity:
            break
    return capacity, items


def _bfd_waste(capacity: int, items: list[int]) -> float:
    """Idle GPU % left by an offline best-fit-decreasing packing of the given per-GPU requests."""
    gaps = [0] * (MILLI + 1)  # gaps[g] = GPUs opened so far with g milli still free
    for size in sorted(items, reverse=True):
        g = next((g for g in range(size, MILLI) if gaps[g]), MILLI)
        if g == MILLI:
            gaps[MILLI - size] += 1
        else:
            gaps[g] -= 1
            gaps[g - size] += 1
    return 100 * sum(g * n for g, n in enumerate(gaps)) / capacity


def _best_fill(sizes: list[int], values: np.ndarray) -> tuple[float, np.ndarray]:
    """The most value one GPU can hold (any multiset of the sizes), and how many of each size that takes."""
    best = np.zeros(MILLI + 1)
    take = np.full(MILLI + 1, -1)
    for room in range(1, MILLI + 1):
        best[room] = best[room - 1]
        for i, size in enumerate(sizes):
            if size <= room and best[room - size] + values[i] > best[room] + 1e-12:
                best[room], take[room] = best[room - size] + values[i], i
    counts = np.zeros(len(sizes))
    room = MILLI
    while room > 0:
        if take[room] < 0:
            room -= 1
        else:
            counts[take[room]] += 1
            room -= sizes[take[room]]
    return float(best[MILLI]), counts


def _simplex_max(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max c·x subject to a·x ≤ b, x ≥ 0, for b ≥ 0 (the slack basis is feasible); Bland's rule, so it ends."""
    m, n = a.shape
    tab = np.zeros((m + 1, n + m + 1))
    tab[:m, :n], tab[:m, n : n + m], tab[:m, -1], tab[m, :n] = a, np.eye(m), b, -c
    basis = list(range(n, n + m))
    while True:
        entering = np.flatnonzero(tab[m, :-1] < -1e-12)
        if not len(entering):
            break
        j = entering[0]
        rows = np.flatnonzero(tab[:m, j] > 1e-12)
        ratios = tab[rows, -1] / tab[rows, j]
        i = min(rows[ratios <= ratios.min() + 1e-12], key=lambda r: basis[r])
        tab[i] /= tab[i, j]
        for r in range(m + 1):
            if r != i and tab[r, j]:
                tab[r] -= tab[r, j] * tab[i]
        basis[i] = j
    x = np.zeros(n + m)
    x[basis] = tab[:m, -1]
    return x[:n]


def _dual_prices(sizes: list[int], counts: list[int]) -> np.ndarray:
    """Cutting-stock dual: GPUs per pod of each size, no filling of one GPU worth more than 1, maximising the total.

    Column generation: solve over the fillings known so far, add the most
    valuable filling of one GPU while it is worth more than 1. The result is
    scaled so that the best filling is worth at most 1, which makes
    Σ count·price a lower bound on the GPUs any packing needs.
    """
    rows = [np.eye(len(sizes))[i] * (MILLI // s) for i, s in enumerate(sizes)]
    while True:
        prices = _simplex_max(np.asarray(counts, dtype=float), np.array(rows), np.ones(len(rows)))
        top, filling = _best_fill(sizes, prices)
        if top <= 1 + 1e-9:
            return prices / max(top, 1.0)
        rows.append(filling)


def _lp_waste(capacity: int, items: list[int]) -> tuple[float, dict[int, float], dict[int, int]]:
    """Lower bound (% of capacity) on the idle GPU any packing of these requests leaves, with the dual prices."""
    tally: dict[int, int] = {}
    for size in items:
        tally[size] = tally.get(size, 0) + 1
    sizes = sorted(tally)
    counts = [tally[s] for s in sizes]
    prices = _dual_prices(sizes, counts)
    waste = MILLI * float(np.dot(counts, prices)) - float(np.dot(counts, sizes))
    return 100 * waste / capacity, dict(zip(sizes, prices.tolist(), strict=True)), tally


def _bounds(trace: str, seed: int) -> tuple[float, float, float, float, float]:
    """(BFD idle %, LP lower bound %, saturation load %, idle % there, lower bound % with pods left out)."""
    capacity, arrivals = _arrivals(trace, seed)
    items = [size for _, size in arrivals]
    lp, prices, tally = _lp_waste(capacity, items)
    # A policy placing every pod while there is room fills up where waste and what has arrived meet the capacity.
    lo, hi = 0, len(arrivals)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        load = arrivals[mid][0]
        if 100 - load > _lp_waste(capacity, items[: mid + 1])[0]:
            lo = mid
        else:
            hi = mid
    load = arrivals[min(hi, len(arrivals) - 1)][0]
    saturated = max(100 - load, _lp_waste(capacity, items[: hi + 1])[0])
    # Leaving pods out: what is left out is unallocated too, so take out the most wasteful first until both meet.
    waste = {s: MILLI * prices[s] - s for s in tally}
    wasted = sum(waste[s] * n for s, n in tally.items())
    left_out = 0.0
    for size in sorted(tally, key=lambda s: waste[s] / s, reverse=True):
        if waste[size] <= 0 or left_out >= wasted:
            break
        # leaving out x pods of this size: wasted -= x·waste, left_out += x·size; stop where they are equal
        x = min(tally[size], (wasted - left_out) / (waste[size] + size))
        wasted -= x * waste[size]
        left_out += x * size
    return _bfd_waste(capacity, items), lp, load, saturated, 100 * max(wasted, left_out) / capacity


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces",
        default=",".join(PAPER_100),
        help="comma-separated trace names (default: the nine with paper values); with --variants any shared pod "
        "list, or all of them as 'all'",
    )
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seeds", type=_seeds, default=_seeds("42-51"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--bound",
        action="store_true",
        help="also print what packing the fractional pods arrived by 100 %% allows (BFD, LP bound, saturation)",
    )
    parser.add_argument(
        "--reserve",
        type=lambda text: [float(x) for x in text.split(",")],
        default=[],
        metavar="SHARES",
        help="experiment: also run lookahead keeping 0.81-like pods off fresh GPUs below these shares of fresh GPUs",
    )
    parser.add_argument("--variants", action="store_true", help="print the FGD-vs-ours table on traces + variants")
    parser.add_argument(
        "--only",
        type=lambda t: [v for v in t.split(",") if v],
        default=list(VARIANTS),
        help="variants for --variants (default: all nine)",
    )
    parser.add_argument("--draws", type=int, default=3, help="draws 0..N-1 of each variant for --variants")
    parser.add_argument(
        "--first-draw", type=int, default=0, metavar="K", help="with --variants, start at draw K (draws K..N-1)"
    )
    parser.add_argument("--json", action="store_true", help="with --variants, also print the table as one JSON line")
    parser.add_argument(
        "--save", type=Path, metavar="FILE", help="with --variants, append every run's curve to FILE (JSON lines)"
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        metavar="FILE",
        help="with --variants, take the runs FILE holds instead of running them again (only valid while the code "
        "of the saved policy is unchanged; --policies fgd --save FILE keeps FGD's runs for later tables)",
    )
    args = parser.parse_args()
    traces = [t for t in args.traces.split(",") if t]
    policies = [p for p in args.policies.split(",") if p]
    if not TRACE_DIR.is_dir():
        print(f"trace directory not found: {TRACE_DIR}", file=sys.stderr)
        return 1
    shared = sorted(f.stem.removeprefix("openb_pod_list_") for f in TRACE_DIR.glob("openb_pod_list_*.csv"))
    if args.variants and traces == ["all"]:
        traces = shared
    # The paper table needs the paper's values; the variant table takes any shared pod list (paper column "-").
    known = shared if args.variants else list(PAPER_100)
    unknown = [t for t in traces if t not in known]
    if unknown:
        parser.error(
            f"no {'pod list' if args.variants else 'paper values'} for trace(s) {', '.join(unknown)}; "
            f"choose from {', '.join(known)}" + ("" if not args.variants else " or all")
        )
    if args.variants:
        bad = [v for v in args.only if v not in VARIANTS]
        if bad or not 0 <= args.first_draw < args.draws:
            parser.error(
                f"--only takes {', '.join(VARIANTS)}; --first-draw K needs 0 <= K < --draws "
                f"(got {bad or (args.first_draw, args.draws)})"
            )
        return _variant_table(args, traces)
    if any(not 0 < share < 1 for share in args.reserve):
        parser.error(f"--reserve shares must be within (0, 1), got {args.reserve}")
    policies += [f"lookahead+reserve{share:g}" for share in args.reserve]
    jobs = [(t, p, s) for t in traces for p in policies for s in args.seeds]
    started = time.perf_counter()
    results: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for trace, policy, _seed, u100, u130, failed in pool.map(_run, jobs, chunksize=1):
            results.setdefault((trace, policy), []).append((u100, u130, failed))
    print(
        f"runs: {len(jobs)} ({len(traces)} traces x {len(policies)} policies x {len(args.seeds)} seeds) "
        f"in {time.perf_counter() - started:.0f} s with {args.jobs} processes"
    )
    print(
        f"metric: median over seeds {args.seeds[0]}-{args.seeds[-1]} of unallocated GPU % "
        "at 100 % (and 130 %) arrived load"
    )
    print()
    width = max(11, *(len(p) for p in policies))
    header = (
        f"{'trace':<12} {'policy':<{width}} {'ours@100':>9} {'paper@100':>10} {'diff':>6} {'ok':>3} "
        f"{'ours@130':>9} {'paper@130':>10}"
    )
    print(header)
    print("-" * len(header))
    failures: list[str] = []
    for trace in traces:
        fgd_ours = None
        for policy in policies:
            values = results[(trace, policy)]
            m100 = statistics.median(v[0] for v in values)
            m130 = statistics.median(v[1] for v in values)
            if policy in POLICIES[:6]:
                i = POLICIES.index(policy)
                p100, p130 = PAPER_100[trace][i], PAPER_130[trace][i]
                ok = abs(m100 - p100) <= TOLERANCE
                if not ok:
                    failures.append(f"{trace}/{policy} {m100:.2f} vs {p100:.2f}")
                if policy == "fgd":
                    fgd_ours = m100
                print(
                    f"{trace:<12} {policy:<{width}} {m100:>9.2f} {p100:>10.2f} {m100 - p100:>+6.2f} "
                    f"{'yes' if ok else 'NO':>3} {m130:>9.2f} {p130:>10.2f}"
                )
            else:
                paper_fgd = PAPER_100[trace][5]
                vs = f"vs FGD: paper {m100 - paper_fgd:+.2f}" + (f", ours {m100 - fgd_ours:+.2f}" if fgd_ours else "")
                if "+reserve" in policy:
                    vs += f"; failed pods (median) {statistics.median(v[2] for v in values):.0f}"
                blank = f"{'':>10} {'':>6} {'':>3}"
                print(f"{trace:<12} {policy:<{width}} {m100:>9.2f} {blank} {m130:>9.2f} {'':>10}  {vs}")
        print()
    within = sum(1 for t in traces for p in policies if p in POLICIES[:6]) - len(failures)
    print(f"paper policies within ±{TOLERANCE} of the paper at 100 %: {within} of {within + len(failures)}")
    for failure in failures:
        print(f"  outside: {failure}")
    if args.bound:
        print()
        print("packing the fractional pods arrived by 100 % (all known in advance, CPU and nodes ignored), medians:")
        print(
            f"{'trace':<12} {'BFD idle %':>10} {'LP bound %':>10} {'saturates at load %':>20} "
            f"{'idle % there':>12} {'bound if pods left out %':>25}"
        )
        for trace in traces:
            rows = [_bounds(trace, seed) for seed in args.seeds]
            med = [statistics.median(r[i] for r in rows) for i in range(5)]
            print(f"{trace:<12} {med[0]:>10.2f} {med[1]:>10.2f} {med[2]:>20.2f} {med[3]:>12.2f} {med[4]:>25.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
