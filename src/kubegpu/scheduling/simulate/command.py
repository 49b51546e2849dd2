"""``kubegpu simulate``: replay a GPU trace under scheduling policies and compare them.

Owns the command line (policies, seeds, trace files or the built-in
synthetic cluster, target load, outputs), running one run in-process or a
policies × seeds sweep in parallel worker processes with a rich progress bar,
the summary table, the ``--json`` lines, and writing the series (CSV, JSON)
and the plot (PNG). Must not contain scheduling logic. Exit codes: 0 done,
2 bad input (including a malformed trace, named by file, line and column),
1 a failure while running or writing.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import queue
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubegpu.scheduling.core.errors import SchedulingError
from kubegpu.scheduling.core.gaps import DEFAULT_HORIZON
from kubegpu.scheduling.core.lookahead import DEFAULT_GAP_WEIGHT
from kubegpu.scheduling.core.model import NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import DEFAULT_POLICY, PAPER_POLICIES, POLICIES, PolicyOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: everything a worker process needs."""

    index: int
    policy: str
    seed: int
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    load: float
    options: PolicyOptions
    tie_break: str
    preemption: bool = False


def _seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        try:
            if dash:
                lo, hi = int(first), int(last)
                if hi < lo or hi - lo > 10_000:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not a seed or a range like 42-51") from None
    return seeds


def _policies(text: str) -> list[str]:
    if text == "all":
        return list(POLICIES)
    if text == "paper":
        return [*PAPER_POLICIES, DEFAULT_POLICY]
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in POLICIES:
            raise argparse.ArgumentTypeError(f"unknown policy {name!r} (see --list-policies)")
    if not names:
        raise argparse.ArgumentTypeError("no policy named")
    return names


def _weights(text: str) -> dict[str, int]:
    weights: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        try:
            if not eq:
                raise ValueError
            weights[name.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not RESOURCE=WEIGHT") from None
    return weights


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubegpu simulate",
        description="Replay a GPU cluster trace under scheduling policies, following the FGD paper's protocol: "
        "shuffle the pods by seed, inflate them to the target load, place them one at a time, no departures.",
    )
    parser.add_argument(
        "--policy",
        type=_policies,
        default=[DEFAULT_POLICY],
        metavar="NAMES",
        help=f"comma-separated policy names, 'paper' (the paper's six + ours) or 'all' (default {DEFAULT_POLICY})",
    )
    parser.add_argument("--list-policies", action="store_true", help="list the policies and exit")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None, help="random seed of the run (default 42)")
    seeds.add_argument("--seeds", type=_seeds, default=None, metavar="LIST", help="seeds, e.g. 42-51 or 1,2,3")
    parser.add_argument("--trace-nodes", type=Path, metavar="CSV", help="node list (sn,cpu_milli,memory_mib,gpu,model)")
    parser.add_argument(
        "--trace-pods", type=Path, metavar="CSV", help="pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)"
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="size of the built-in synthetic cluster/workload (default 1.0)"
    )
    parser.add_argument(
        "--load", type=float, default=130.0, help="target arrived load, %% of GPU capacity (default 130)"
    )
    parser.add_argument(
        "--tie-break",
        choices=("rank", "uniform"),
        default="rank",
        help="equal scores: seeded node rank as the FGD artifact (default) or uniform draw as upstream kube-scheduler",
    )
    parser.add_argument(
        "--weights",
        type=_weights,
        metavar="R=W,...",
        help="resource weights of the NodeResourcesFit policies, e.g. cpu=1,memory=1,nvidia.com/gpu=3",
    )
    parser.add_argument(
        "--horizon",
        type=int,
        default=DEFAULT_HORIZON,
        metavar="PODS",
        help=f"lookahead: how many coming pods the gap tables look ahead (default {DEFAULT_HORIZON})",
    )
    parser.add_argument(
        "--gap-weight",
        type=float,
        default=DEFAULT_GAP_WEIGHT,
        metavar="W",
        help=f"lookahead: weight of the k-pod stranded share against FGD's measure, 0 turns it off "
        f"(default {DEFAULT_GAP_WEIGHT:g})",
    )
    parser.add_argument(
        "--preemption",
        action="store_true",
        help="let a pod no node can take evict lower-priority pods (pod list column 'priority')",
    )
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for sweeps (default: one per CPU)")
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for the outputs (default .)")
    parser.add_argument("--name", default="kubegpu-simulate", help="file name stem of the outputs")
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG plot")
    parser.add_argument("--json", action="store_true", help="print one JSON object per run instead of the table")
    return parser


def _list_policies() -> None:
    width = max(len(n) for n in POLICIES)
    for name, info in POLICIES.items():
        marker = " (default)" if name == DEFAULT_POLICY else ""
        print(f"{name.ljust(width)}  {info.description}{marker}")


def _run(spec: RunSpec, progress: Callable[[int, int], None] | None = None) -> Any:
    from kubegpu.scheduling.simulate.report import RunSummary
    from kubegpu.scheduling.simulate.simulator import simulate

    started = time.perf_counter()
    result = simulate(
        spec.nodes,
        spec.pods,
        spec.policy,
        spec.seed,
        target_load=spec.load,
        options=spec.options,
        tie_break=spec.tie_break,
        preemption=spec.preemption,
        progress=progress,
    )
    return RunSummary.of(result, time.perf_counter() - started)


_PROGRESS_QUEUE: Any = None


def _init_worker(progress_queue: Any) -> None:
    global _PROGRESS_QUEUE
    _PROGRESS_QUEUE = progress_queue


def _run_in_worker(spec: RunSpec) -> Any:
    def report(done: int, total: int) -> None:
        _PROGRESS_QUEUE.put((spec.index, done, total))

    return _run(spec, report)


def _execute(specs: Sequence[RunSpec], jobs: int, show_progress: bool) -> list[Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not (show_progress and console.is_terminal)) as bar:
        tasks = [bar.add_task(f"{s.policy} seed {s.seed}", total=None) for s in specs]
        if jobs <= 1 or len(specs) == 1:
            results = []
            for spec, task in zip(specs, tasks, strict=True):

                def advance(done: int, total: int, task: Any = task) -> None:
                    bar.update(task, completed=done, total=total)

                results.append(_run(spec, advance))
            return results
        # Not fork: the progress bar's refresh thread is running, and forking a threaded process is unsafe.
        context = multiprocessing.get_context("forkserver" if sys.platform.startswith("linux") else "spawn")
        progress_queue = context.Queue()
        with ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(progress_queue,)
        ) as pool:
            futures: list[Future[Any]] = [pool.submit(_run_in_worker, spec) for spec in specs]
            while not all(f.done() for f in futures):
                try:
                    index, done, total = progress_queue.get(timeout=0.2)
                    bar.update(tasks[index], completed=done, total=total)
                except queue.Empty:
                    pass
            return [f.result() for f in futures]


def _table(runs: Sequence[Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "policy",
        "seed",
        "pods",
        "failed",
        "preempted",
        "unallocated @100%",
        "unallocated @130%",
        "seconds",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for run in runs:
        table.add_row(
            run.policy,
            str(run.seed),
            str(run.pods),
            str(run.failed),
            str(run.preempted),
            f"{run.unallocated_100:.2f}",
            f"{run.unallocated_130:.2f}",
            f"{run.seconds:.1f}",
        )
    policies = list(dict.fromkeys(r.policy for r in runs))
    if len(runs) > len(policies):
        table.add_section()
        for policy in policies:
            mine = [r for r in runs if r.policy == policy]
            table.add_row(
                policy,
                "median",
                "",
                "",
                "",
                f"{statistics.median(r.unallocated_100 for r in mine):.2f}",
                f"{statistics.median(r.unallocated_130 for r in mine):.2f}",
                f"{statistics.median(r.seconds for r in mine):.1f}",
            )
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a pipe has no width; keep rows whole rather than wrapped at 80
    console.print(table)


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_policies:
        _list_policies()
        return 0
    if not 0 < args.scale <= 100:
        parser.error(f"--scale must be within (0, 100], got {args.scale}")
    if not 0 < args.load <= 1000:
        parser.error(f"--load must be within (0, 1000] percent, got {args.load}")
    if args.jobs < 0:
        parser.error(f"--jobs must not be negative, got {args.jobs}")
    if args.horizon < 1:
        parser.error(f"--horizon must be at least 1 pod, got {args.horizon}")
    if not (math.isfinite(args.gap_weight) and args.gap_weight >= 0):
        parser.error(f"--gap-weight must be a non-negative number, got {args.gap_weight}")
    seeds = args.seeds if args.seeds is not None else [42 if args.seed is None else args.seed]
    if any(seed < 0 for seed in seeds):
        parser.error(f"--seed must be a non-negative integer, got {min(seeds)}")
    if (args.trace_nodes is None) != (args.trace_pods is None):
        parser.error("--trace-nodes and --trace-pods go together: both (a trace) or neither (the synthetic cluster)")
    if args.name in ("", ".", "..") or Path(args.name).name != args.name:
        parser.error(f"--name must be a file name without '/', got {args.name!r} (choose the directory with --out)")

    from kubegpu.scheduling.core.noderesources import NodeResourcesFitScore
    from kubegpu.scheduling.simulate import synthetic, trace

    try:
        if args.weights is not None:
            NodeResourcesFitScore("MostAllocated", args.weights)  # validates names and ranges
        nodes = trace.read_nodes(args.trace_nodes) if args.trace_nodes else synthetic.synthetic_nodes(args.scale)
        pods = trace.read_pods(args.trace_pods) if args.trace_pods else synthetic.synthetic_pods(args.scale)
    except SchedulingError as exc:
        parser.error(str(exc))
    if sum(n.gpus for n in nodes) == 0:
        parser.error(f"{args.trace_nodes or 'the synthetic cluster'}: the cluster has no GPU, nothing to schedule")
    source = (
        f"{args.trace_pods.name if args.trace_pods else 'synthetic pods'} on "
        f"{args.trace_nodes.name if args.trace_nodes else 'synthetic nodes'}"
    )
    options = PolicyOptions(weights=args.weights, horizon=args.horizon, gap_weight=args.gap_weight)
    specs = [
        RunSpec(i, policy, seed, tuple(nodes), tuple(pods), args.load / 100.0, options, args.tie_break, args.preemption)
        for i, (policy, seed) in enumerate((p, s) for p in args.policy for s in seeds)
    ]
    jobs = args.jobs or min(len(specs), os.cpu_count() or 1)
    log.info("simulating", extra={"runs": len(specs), "jobs": jobs, "nodes": len(nodes), "pods": len(pods)})
    try:
        runs = _execute(specs, jobs, show_progress=not args.json)
    except SchedulingError as exc:
        print(f"kubegpu simulate: error: {exc}", file=sys.stderr)
        return 1

    from kubegpu.scheduling.simulate import report

    try:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = args.out / args.name
        meta = {"source": source, "load_pct": args.load, "tie_break": args.tie_break}
        report.write_series_csv(stem.with_suffix(".csv"), runs)
        report.write_series_json(stem.with_suffix(".json"), runs, meta)
        if not args.no_plot:
            report.write_plot(stem.with_suffix(".png"), runs, f"{source}: {len(nodes)} nodes, {len(pods)} pods")
    except OSError as exc:
        print(f"kubegpu simulate: error: cannot write outputs to {args.out}: {exc}", file=sys.stderr)
        return 1
    for run in runs:
        log.info(
            "run finished",
            extra={
                "policy": run.policy,
                "seed": run.seed,
                "unallocated_100": run.unallocated_100,
                "seconds": run.seconds,
            },
        )
    if args.json:
        for run in runs:
            print(json.dumps(run.to_json()))
    else:
        _table(runs, f"{source} — target load {args.load:g} %")
        written = [stem.with_suffix(s) for s in (".csv", ".json", *(() if args.no_plot else (".png",)))]
        print("wrote " + ", ".join(str(p) for p in written))
    empty = [run for run in runs if run.pods and run.failed == run.pods]
    for run in empty:
        print(
            f"kubegpu simulate: error: {run.policy} seed {run.seed} placed none of its {run.pods} pods "
            "(do the pods ask for GPU models no node has?)",
            file=sys.stderr,
        )
    return 1 if empty else 0
