"""Our lookahead policy: FGD's measure plus the GPU a node's CPU cannot feed for the workload to come."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.errors import InvalidSpec
from kubegpu.scheduling.fgd import FgdScore
from kubegpu.scheduling.fragmentation import CompiledWorkload
from kubegpu.scheduling.lookahead import LookaheadGpu, LookaheadModel, LookaheadScore
from kubegpu.scheduling.workload import TargetWorkload

from .helpers import cluster, node, pod

# 8 whole-GPU pods of 10 cores and 2 CPU-only pods of 30 cores: 140 cores for 8 GPUs, ρ = 17.5 milli CPU per GPU-milli.
WORKLOAD = [pod(f"g{i}", cpu=10_000, gpus=1) for i in range(8)] + [pod(f"c{i}", cpu=30_000) for i in range(2)]


def test_rho_counts_the_cpu_of_cpu_only_pods_too() -> None:
    model = LookaheadModel.from_pods(WORKLOAD, ("G2",))
    assert model.cpu_per_gpu_milli == pytest.approx(140_000 / 8_000)
    assert len(model.workload.target.shapes) == 2  # every shape, not just the popular 95 %


def test_stranded_gpu_is_what_free_cpu_cannot_feed() -> None:
    model = LookaheadModel.from_pods(WORKLOAD, ("G2",))
    # 8000 free milli need 140 cores; with 70 cores only 4000 milli can be fed
    assert list(model.stranded(np.array([70_000, 200_000]), np.array([8000, 8000]))) == [4000, 0]


def test_cpu_only_pod_goes_to_the_cpu_rich_node_where_fgd_sees_a_tie() -> None:
    state = cluster(node("gpu-dense", gpus=8, cpu=96_000), node("cpu-rich", gpus=2, cpu=104_000))
    cpu_pod = pod("c", cpu=30_000)
    nodes = np.arange(2)
    fgd = FgdScore(CompiledWorkload(TargetWorkload.from_pods(WORKLOAD), state.models)).score(state, cpu_pod, nodes)
    assert list(fgd) == [50, 50]
    ours = LookaheadScore(LookaheadModel.from_pods(WORKLOAD, state.models)).score(state, cpu_pod, nodes)
    assert ours[1] > ours[0]


def test_fractional_pod_takes_the_tightest_of_equally_scored_gpus() -> None:
    pods = [pod(f"s{i}", cpu=1000, gpus=1, milli=300) for i in range(4)]
    state = cluster(node("n", gpus=4, cpu=64_000))
    state.bind(pod("a", cpu=0, gpus=1, milli=100), 0, [1])
    state.bind(pod("b", cpu=0, gpus=1, milli=400), 0, [3])
    model = LookaheadModel.from_pods(pods, state.models)
    # leaving 600 or 300 (GPU 1: 900 -> 600, GPU 3: 600 -> 300) keeps the 300-shape usable: the tightest is GPU 3
    assert LookaheadGpu(model).pick(state, pod("p", cpu=1000, gpus=1, milli=300), 0) == (3,)


def test_a_workload_without_gpu_pods_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="at least one GPU pod"):
        LookaheadModel.from_pods([pod("c")], ("G2",))
