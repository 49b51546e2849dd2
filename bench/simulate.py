"""Simulator speed: one default-trace run to 130 % load per policy, timed one at a time.

Prints, per policy, the run's wall time, scheduling throughput (pods/s over
the whole replay, metrics recording included) and the per-decision latency
percentiles (filter + score + select + GPU pick + bind). Uses the shared
Alibaba trace when it is there, the built-in synthetic cluster otherwise.

    python bench/simulate.py
    python bench/simulate.py --policies fgd,lookahead --seed 43
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from kubegpu.scheduling.core.policies import POLICIES
from kubegpu.scheduling.simulate.simulator import simulate
from kubegpu.scheduling.simulate.synthetic import synthetic_nodes, synthetic_pods
from kubegpu.scheduling.simulate.trace import read_nodes, read_pods

TRACE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "alibaba-gpu-v2023"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--trace", default="default", help="pod list name under the shared trace directory")
    args = parser.parse_args()
    pod_file = TRACE_DIR / f"openb_pod_list_{args.trace}.csv"
    if pod_file.exists():
        nodes, pods = read_nodes(TRACE_DIR / "openb_node_list_gpu_node.csv"), read_pods(pod_file)
        source = f"{pod_file.name} ({len(nodes)} nodes)"
    else:
        nodes, pods = synthetic_nodes(), synthetic_pods()
        source = f"synthetic ({len(nodes)} nodes)"
    print(f"trace: {source}, seed {args.seed}, target load 130 %, one process")
    for policy in args.policies.split(","):
        started = time.perf_counter()
        result = simulate(nodes, pods, policy, args.seed, timer=time.perf_counter)
        seconds = time.perf_counter() - started
        decisions = result.decision_seconds * 1000
        print(
            f"{policy}: {result.pods} pods in {seconds:.2f} s = {result.pods / seconds:.0f} pods/s; "
            f"decision p50 {np.percentile(decisions, 50):.3f} ms, p99 {np.percentile(decisions, 99):.3f} ms, "
            f"max {decisions.max():.1f} ms; unallocated @100% {result.unallocated_at(100):.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
