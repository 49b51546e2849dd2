"""Why a policy leaves GPUs unallocated at 100 % load: failed pods, idle GPUs, placements that broke whole nodes.

For one trace (a shared pod list or a generated variant, see
``bench/trace_variants.py``), each policy and seed, prints:

* the pods that failed while the arrived load was at most 100 % of capacity,
  by class (fractional, 1/2/4/8 GPUs; ``+spec`` when model-constrained), as
  GPUs asked, and at which load the first of them failed;
* what is idle at 100 % load: free share on partly used GPUs; fully free GPUs
  on nodes whose free CPU or memory cannot take the smallest GPU pod of the
  workload; fully free GPUs that none of the pods failed so far could use
  (wrong model, too few GPUs together, too little CPU); the rest;
* every placement that took part of an *empty* node with 8 GPUs for a pod
  asking fewer, by pod class and node model, and for ``lookahead`` policies
  how the score terms ranked it: the mean drop of fragmentation F, of
  CPU-stranded GPU S, the gap-table gain and the scarcity penalty on the
  chosen node against the best-scored node that was already in use; of
  those by 100 % load, how many broke the node while another node (one in
  use, or a smaller one) could have taken the pod, and at what load the last
  empty 8-GPU node went (median, and per seed): once it has gone, every 8-GPU
  pod that arrives fails.

    python bench/lookahead_why.py --trace multigpu30 --draw 100 --seeds 1
    python bench/lookahead_why.py --trace cpu050 --policies fgd,lookahead,lookahead-old --seeds 1-3
    python bench/lookahead_why.py --trace gpuspec05 --shared --seeds 42     # the shared list, not a variant draw

``lookahead-old`` is ``lookahead`` before issue 14 (shapes weighted by pod
count, no scarcity term).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_variants import TRACE_DIR, VARIANTS, build

from kubegpu.scheduling.core.cluster import BoolArray, ClusterState, IntArray
from kubegpu.scheduling.core.filters import default_filters
from kubegpu.scheduling.core.framework import MAX_NODE_SCORE
from kubegpu.scheduling.core.lookahead import LookaheadScore
from kubegpu.scheduling.core.model import MILLI, NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import PolicyOptions
from kubegpu.scheduling.simulate.simulator import simulate
from kubegpu.scheduling.simulate.trace import read_nodes

OLD = PolicyOptions(demand_weighted=False, scarcity=False)
TERMS = ("F drop", "S drop", "gap gain", "scarcity")


def _class(pod: PodSpec) -> str:
    kind = "cpu" if not pod.num_gpu else "frac" if pod.is_fractional else f"{pod.num_gpu}g"
    return kind + ("+spec" if pod.gpu_models else "")


class _Terms:
    """Wraps a lookahead scorer: when the best score lands on an empty 8-GPU node, records the terms there and on
    the best-scored node already in use (``last``)."""

    def __init__(self, scorer: LookaheadScore) -> None:
        self.scorer = scorer
        self.last: tuple[tuple[float, ...], tuple[float, ...]] | None = None
        scorer.cache_key = lambda pod: None  # type: ignore[method-assign]  # every node scored afresh
        inner = scorer.score

        def score(state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
            out = inner(state, pod, nodes)
            self.last = None
            if pod.num_gpu == 8 or not len(nodes):
                return out
            empty = _empty8(state, state.gpu_free, state.cpu_free)[nodes]
            final = scorer.normalize(out)  # raw scores are Δ; the framework ranks these
            top = final.max()
            if not (empty & (final == top)).any() or empty.all():
                return out
            chosen = int(nodes[np.flatnonzero(empty & (final == top))[0]])
            used = np.flatnonzero(~empty)
            other = int(nodes[used[np.argmax(final[used])]])
            self.last = (
                (*self.terms(state, pod, chosen), float(top)),
                (*self.terms(state, pod, other), float(final[used].max())),
            )
            return out

        scorer.score = score  # type: ignore[method-assign]

    def terms(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[float, float, float, float]:
        model = self.scorer.model
        cw = model.workload
        nodes = np.array([node])
        scarce = float(model.scarce(state, pod, nodes)[0])
        free = state.gpu_free[node]
        cpu = state.cpu_free[nodes]
        total = np.array([int(free.sum())])
        s_before = float(model.stranded(cpu, total)[0])
        s_after = float(model.stranded(cpu - pod.cpu_milli, total - pod.total_gpu_milli)[0])
        gap = 0.0
        if pod.is_fractional:
            options = np.unique(free[free >= pod.gpu_milli])
            gains = model.gap_gain(options, pod.gpu_milli)
            f_drop = -1e18
            for g, gain in zip(options, gains, strict=True):
                after = _frag_after(state, cw, node, pod, int(g))
                if _frag(state, cw, node) - after + gain > f_drop + gap:
                    f_drop, gap = _frag(state, cw, node) - after, float(gain)
        else:
            f_drop = _frag(state, cw, node) - _frag_after(state, cw, node, pod, MILLI)
        return f_drop, s_before - s_after, gap, scarce


def _frag(state: ClusterState, cw: object, node: int) -> float:
    from kubegpu.scheduling.core.fragmentation import CompiledWorkload, node_fragmentation

    assert isinstance(cw, CompiledWorkload)
    return float(node_fragmentation(cw, state.cpu_free[[node]], state.gpu_free[[node]], state.model_id[[node]])[0])


def _frag_after(state: ClusterState, cw: object, node: int, pod: PodSpec, share: int) -> float:
    from kubegpu.scheduling.core.fragmentation import CompiledWorkload, node_fragmentation

    assert isinstance(cw, CompiledWorkload)
    gpu = state.gpu_free[[node]].copy()
    if pod.is_fractional:
        gpu[0, int(np.flatnonzero(gpu[0] == share)[0])] -= pod.gpu_milli
    else:
        taken = np.flatnonzero(gpu[0] == MILLI)[: pod.num_gpu]
        gpu[0, taken] = 0
    return float(node_fragmentation(cw, state.cpu_free[[node]] - pod.cpu_milli, gpu, state.model_id[[node]])[0])


@dataclass
class _Before:
    """The cluster's free GPU-milli and CPU before the pod now observed, and the GPU-milli arrived so far."""

    gpu: IntArray
    cpu: IntArray
    arrived: int = 0


@dataclass
class Run:
    """What one policy did with one seed (see the module docstring)."""

    u100: float
    failed: dict[str, float]  # GPUs asked by pods failed by 100 % load, by class
    first: dict[str, float]  # load % of the first failure, by class
    idle: dict[str, float]  # % of cluster GPU idle at 100 % load, by cause
    breaks: collections.Counter[tuple[str, str]]  # (pod class, node model) of empty 8-GPU nodes broken
    early_breaks: int  # of those, by 100 % load
    chosen_breaks: int  # of those by 100 %, where another node could have taken the pod
    last_empty: float | None  # load % at which no empty 8-GPU node was left
    ranked: list[tuple[tuple[float, ...], tuple[float, ...]]]  # score terms: chosen empty node, best used node


def analyse(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], policy: str, seed: int) -> Run:
    options = OLD if policy == "lookahead-old" else None
    name = "lookahead" if policy.startswith("lookahead") else policy
    capacity = MILLI * sum(n.gpus for n in nodes)
    gpu_pods = [p for p in pods if p.num_gpu]
    min_cpu = min(p.cpu_milli for p in gpu_pods)
    min_mem = min(p.memory_mib for p in gpu_pods)
    failed: dict[str, float] = collections.defaultdict(float)
    failed_pods: list[PodSpec] = []
    first_fail: dict[str, float] = {}
    breaks: collections.Counter[tuple[str, str]] = collections.Counter()
    early_breaks = chosen_breaks = 0  # breaks by 100 % load: all, and those where another node could take the pod
    last_empty: float | None = None
    ranked: list[tuple[tuple[float, ...], tuple[float, ...]]] = []
    idle: dict[str, float] = {}
    fresh = ClusterState(nodes)
    seen = _Before(fresh.gpu_free, fresh.cpu_free)  # before the first pod: nothing placed
    recorder: list[_Terms] = []

    def observe(i: int, pod: PodSpec, state: ClusterState) -> None:
        nonlocal early_breaks, chosen_breaks, last_empty
        seen.arrived += pod.total_gpu_milli
        load = 100 * seen.arrived / capacity
        g0, c0 = seen.gpu, seen.cpu
        placed = bool((state.gpu_free != g0).any() or (state.cpu_free != c0).any())
        if not placed and pod.num_gpu and load <= 100:
            failed[_class(pod)] += pod.total_gpu_milli / MILLI
            failed_pods.append(pod)
            first_fail.setdefault(_class(pod), round(load, 1))
        if placed and pod.num_gpu != 8:
            was_empty = _empty8(state, g0, c0)
            touched = (state.gpu_free != g0).any(axis=1) | (state.cpu_free != c0)
            for n in np.flatnonzero(touched & was_empty):
                breaks[(_class(pod), state.nodes[n].model)] += 1
                if load <= 100:
                    early_breaks += 1
                    # The nodes the placement did not touch are as they were before it, so the scheduler's
                    # own filters on them say where else the pod could have gone.
                    chosen_breaks += bool((_feasible(state, pod) & ~touched & ~was_empty).any())
                if recorder and recorder[0].last:
                    ranked.append(recorder[0].last)
        if last_empty is None and not _empty8(state, state.gpu_free, state.cpu_free).any():
            last_empty = round(load, 2)
        if load >= 100 and not idle:
            free = state.gpu_free[:, : state.max_gpus]
            partly = float(free[(free > 0) & (free < MILLI)].sum())
            whole = free == MILLI
            starved = (state.cpu_free < min_cpu) | (state.memory_free < min_mem)
            no_cpu = float(MILLI * whole[starved].sum())
            usable = np.zeros(state.size, dtype=np.bool_)
            for p in failed_pods[-200:]:
                usable |= _feasible(state, p)
            unusable = float(MILLI * whole[~starved & ~usable].sum())
            rest = float(MILLI * whole.sum()) - no_cpu - unusable
            idle.update(
                {
                    "partly used GPUs": partly,
                    "whole GPUs, node lacks CPU/memory": no_cpu,
                    "whole GPUs no failed pod could use": unusable,
                    "whole GPUs, other": rest,
                }
            )
        seen.gpu, seen.cpu = state.gpu_free.copy(), state.cpu_free.copy()

    import kubegpu.scheduling.core.lookahead as la

    original = la.LookaheadScore.__init__

    def hooked(self: LookaheadScore, model: la.LookaheadModel) -> None:
        original(self, model)
        recorder.append(_Terms(self))

    la.LookaheadScore.__init__ = hooked  # type: ignore[method-assign]
    try:
        result = simulate(nodes, pods, name, seed, options=options, observer=observe)
    finally:
        la.LookaheadScore.__init__ = original  # type: ignore[method-assign]
    return Run(
        result.unallocated_at(100),
        dict(failed),
        first_fail,
        {k: 100 * v / capacity for k, v in idle.items()},
        breaks,
        early_breaks,
        chosen_breaks,
        last_empty,
        ranked,
    )


def _empty8(state: ClusterState, gpu: IntArray, cpu: IntArray) -> BoolArray:
    """Which nodes are 8-GPU nodes with every GPU and all CPU free, given their free GPU-milli and CPU."""
    out: BoolArray = (state.gpu_count == 8) & (gpu == MILLI).all(axis=1) & (cpu == state.cpu_capacity)
    return out


def _feasible(state: ClusterState, pod: PodSpec) -> BoolArray:
    """Which nodes could take the pod now, by the filters every built-in policy schedules with."""
    out = np.ones(state.size, dtype=np.bool_)
    for plugin in default_filters():
        out &= plugin.filter(state, pod)
    return out


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", default="multigpu30", help="a shared pod list name or a variant (multigpu30, gpuspec34)"
    )
    parser.add_argument("--draw", type=int, default=100, help="variant draw (evaluation uses 0-2; 100+ for exploring)")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="the shared pod list of that name, also where a variant has the name (gpuspec05)",
    )
    parser.add_argument("--policies", default="fgd,lookahead-old,lookahead")
    parser.add_argument("--seeds", type=_seeds, default=_seeds("1"))
    args = parser.parse_args()
    if not TRACE_DIR.is_dir():
        print(f"trace directory not found: {TRACE_DIR}", file=sys.stderr)
        return 1
    nodes = read_nodes(TRACE_DIR / "openb_node_list_gpu_node.csv")
    variant = args.trace in VARIANTS and not args.shared
    if not variant and not (TRACE_DIR / f"openb_pod_list_{args.trace}.csv").is_file():
        parser.error(f"no shared pod list {args.trace!r} in {TRACE_DIR}")
    pods = build(f"{args.trace}@{args.draw}" if variant else args.trace)
    label = f"{args.trace} (draw {args.draw})" if variant else f"{args.trace} (shared list)"
    for policy in [p for p in args.policies.split(",") if p]:
        runs = [analyse(nodes, pods, policy, seed) for seed in args.seeds]
        print(f"== {label} {policy}, seeds {args.seeds[0]}-{args.seeds[-1]}")
        print(f"  unallocated at 100 %: median {statistics.median(r.u100 for r in runs):.2f} %")
        failed: dict[str, float] = collections.defaultdict(float)
        for r in runs:
            for cls, gpus in r.failed.items():
                failed[cls] += gpus
        print("  GPUs asked by pods failed by 100 % load (mean per run; first failure at load %):")
        for cls, gpus in sorted(failed.items(), key=lambda item: -item[1]):
            firsts = [r.first[cls] for r in runs if cls in r.first]
            print(f"    {cls:<9} {gpus / len(runs):7.1f}   first at {min(firsts):5.1f} %")
        print("  idle at 100 % load (% of cluster GPU, mean):")
        for key in runs[0].idle:
            print(f"    {key:<38} {statistics.mean(r.idle[key] for r in runs):5.2f}")
        breaks: collections.Counter[tuple[str, str]] = collections.Counter()
        for r in runs:
            breaks.update(r.breaks)
        top = ", ".join(f"{c} on {m}: {n / len(runs):.0f}" for (c, m), n in breaks.most_common(6))
        print(
            f"  empty 8-GPU nodes broken by smaller pods (mean per run): {sum(breaks.values()) / len(runs):.0f} ({top})"
        )
        gone = [r.last_empty for r in runs if r.last_empty is not None]
        print(
            f"    by 100 % load: {statistics.mean(r.early_breaks for r in runs):.0f}, of which "
            f"{statistics.mean(r.chosen_breaks for r in runs):.1f} where another node could have taken the pod; "
            "the last empty 8-GPU node went at "
            + (f"{statistics.median(gone):.2f} % load (median)" if gone else "- (never)")
        )
        if len(runs) > 1:
            print(
                "    last empty 8-GPU node gone, per seed: "
                + ", ".join(
                    f"{seed}: {r.last_empty if r.last_empty is not None else '-'}"
                    for seed, r in zip(args.seeds, runs, strict=True)
                )
            )
        ranked = [pair for r in runs for pair in r.ranked]
        if ranked:
            print(
                f"  score terms of those placements (mean milli; chosen empty node vs best used node), n={len(ranked)}:"
            )
            for t, term in enumerate(TERMS):
                chosen = statistics.mean(c[t] for c, _ in ranked)
                other = statistics.mean(o[t] for _, o in ranked)
                print(f"    {term:<10} {chosen:9.1f} {other:9.1f}")
            print(
                f"    score      {statistics.mean(c[4] for c, _ in ranked):9.1f} "
                f"{statistics.mean(o[4] for _, o in ranked):9.1f}  (of {MAX_NODE_SCORE})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
