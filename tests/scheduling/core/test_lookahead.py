"""Our lookahead policy: FGD's measure plus the GPU a node's CPU cannot feed and the shares the next pods cannot use."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.fgd import FgdScore, sigmoid_score
from kubegpu.scheduling.core.fragmentation import CompiledWorkload
from kubegpu.scheduling.core.lookahead import RAW_SCALE, LookaheadGpu, LookaheadModel, LookaheadScore
from kubegpu.scheduling.core.policies import PolicyOptions, build_profile
from kubegpu.scheduling.core.workload import TargetWorkload
from tests.scheduling.helpers import cluster, node, pod

# 8 whole-GPU pods of 10 cores and 2 CPU-only pods of 30 cores: 140 cores for 8 GPUs, ρ = 17.5 milli CPU per GPU-milli.
WORKLOAD = [pod(f"g{i}", cpu=10_000, gpus=1) for i in range(8)] + [pod(f"c{i}", cpu=30_000) for i in range(2)]


def test_rho_counts_the_cpu_of_cpu_only_pods_too() -> None:
    model = LookaheadModel.from_pods(WORKLOAD, ("G2",))
    assert model.cpu_per_gpu_milli == pytest.approx(140_000 / 8_000)


# 16 one-GPU pods and 2 eight-GPU pods: 1/9 of the pods, half of the GPU request.
BIG_MIX = [pod(f"w{i}", cpu=10_000, gpus=1) for i in range(16)] + [pod(f"b{i}", cpu=88_000, gpus=8) for i in range(2)]


@pytest.mark.parametrize(
    ("demand_weighted", "weights"), [(True, (0.5, 0.5)), (False, (16 / 19, 2 / 19))], ids=["gpu-request", "pod-count"]
)
def test_shapes_weigh_what_they_ask_of_the_gpus_not_how_many_pods_they_are(
    demand_weighted: bool, weights: tuple[float, float]
) -> None:
    model = LookaheadModel.from_pods([*BIG_MIX, pod("c", cpu=4000)], ("G2",), demand_weighted=demand_weighted)
    target = model.workload.target
    got = dict(zip(target.shapes, target.weights, strict=True))
    assert got[(10_000, 1, 1000, frozenset())] == pytest.approx(weights[0])
    assert got[(88_000, 8, 1000, frozenset())] == pytest.approx(weights[1])
    assert demand_weighted == ((4_000, 0, 0, frozenset()) not in got)  # CPU-only pods ask no GPU: weight 0


def test_weighted_by_gpu_request_breaking_the_last_whole_node_costs_more_than_by_pod_count() -> None:
    state = cluster(node("whole", gpus=8, cpu=96_000), node("used", gpus=8, cpu=96_000))
    state.bind(pod("x", cpu=10_000, gpus=1), 1, [0])
    one = pod("p", cpu=10_000, gpus=1)
    nodes = np.arange(2)
    by_demand = LookaheadScore(LookaheadModel.from_pods(BIG_MIX, state.models, demand_weighted=True))
    by_count = LookaheadScore(LookaheadModel.from_pods(BIG_MIX, state.models))  # the default, as FGD
    demand, count = by_demand.score(state, one, nodes), by_count.score(state, one, nodes)
    assert demand[1] - demand[0] > count[1] - count[0] >= 0  # breaking the whole node costs 7000 × ½, not 7000 × 1/9


def test_with_the_cluster_given_a_one_gpu_pod_keeps_off_the_last_whole_node_the_eight_gpu_pods_need() -> None:
    nodes_ = [node("whole", gpus=8, cpu=96_000), node("used", gpus=8, cpu=96_000), node("small", gpus=2, cpu=32_000)]
    state = cluster(*nodes_)
    state.bind(pod("x", cpu=10_000, gpus=1), 1, [0])
    one = pod("p", cpu=10_000, gpus=1)
    with_homes = LookaheadScore(LookaheadModel.from_pods(BIG_MIX, state.models, nodes=state.nodes))
    without = LookaheadScore(LookaheadModel.from_pods(BIG_MIX, state.models))
    kept, plain = with_homes.score(state, one, np.arange(2)), without.score(state, one, np.arange(2))
    # Only 8-GPU nodes hold the 8-GPU pods: the scarcity term charges the break the pod-count measure undervalues.
    assert kept[1] - kept[0] > plain[1] - plain[0] > 0


T4 = frozenset({"T4"})
# Half the GPU request can run only on T4; the rest anywhere.
BOUND_MIX = [pod(f"t{i}", cpu=4_000, gpus=1, models=T4) for i in range(10)] + [
    pod(f"a{i}", cpu=4_000, gpus=1) for i in range(10)
]


def test_an_unconstrained_pod_leaves_a_scarce_model_to_the_pods_bound_to_it() -> None:
    state = cluster(node("t4", gpus=2, cpu=104_000, model="T4"), node("g2", gpus=2, cpu=104_000, model="G2"))
    nodes = np.arange(2)
    free = pod("p", cpu=4_000, gpus=1)
    ours = LookaheadScore(LookaheadModel.from_pods(BOUND_MIX, state.models, nodes=state.nodes)).score(
        state, free, nodes
    )
    assert ours[1] > ours[0]
    plain = LookaheadModel.from_pods(BOUND_MIX, state.models)
    assert plain.scarcity is None
    without = LookaheadScore(plain).score(state, free, nodes)
    assert without[0] > ours[0] and without[1] == ours[1]  # the term is what it pays on T4, nothing elsewhere
    bound = pod("q", cpu=4_000, gpus=1, models=T4)  # where it belongs it pays nothing
    with_term = LookaheadScore(LookaheadModel.from_pods(BOUND_MIX, state.models, nodes=state.nodes)).score(
        state, bound, nodes[:1]
    )
    assert with_term[0] == LookaheadScore(plain).score(state, bound, nodes[:1])[0]


def test_cached_scores_stay_exact_as_the_pressure_on_a_scarce_model_moves() -> None:
    state = cluster(
        node("t4", gpus=2, cpu=104_000, model="T4"), node("g2", gpus=8, cpu=96_000), node("g3", gpus=8, cpu=96_000)
    )
    light = BOUND_MIX[:1] + [pod(f"a{i}", cpu=4_000, gpus=1) for i in range(19)]  # 5 % bound to T4
    scorer = LookaheadScore(LookaheadModel.from_pods(light, state.models, nodes=state.nodes))
    free = pod("p", cpu=4_000, gpus=1)
    nodes = np.arange(3)
    first = scorer.score(state, free, nodes)
    key = scorer.cache_key(free)
    for i in range(6):  # fill g2 only: t4's node is unchanged, but the capacity to come (and its pressure) falls
        state.bind(pod(f"f{i}", cpu=1_000, gpus=1), 1, [i])
    assert scorer.cache_key(free) != key
    again = scorer.score(state, free, nodes)
    assert again[0] > first[0]  # the same t4 node costs the free pod less now


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


# A default-trace-like mix: 0.47 pods (common), 0.32 and 0.65 pods, whole-GPU pods and CPU-only pods.
MIX = (
    [pod(f"h{i}", cpu=8_000, gpus=1, milli=470) for i in range(9)]
    + [pod(f"t{i}", cpu=4_000, gpus=1, milli=320) for i in range(3)]
    + [pod(f"s{i}", cpu=12_000, gpus=1, milli=650) for i in range(3)]
    + [pod(f"w{i}", cpu=11_000, gpus=1) for i in range(10)]
    + [pod(f"c{i}", cpu=12_000) for i in range(2)]
)


def _half_and_fresh() -> ClusterState:
    """Two one-GPU nodes: one holds a 0.47 pod (530 milli left), the other is untouched."""
    state = cluster(node("half", gpus=1, cpu=96_000), node("fresh", gpus=1, cpu=96_000))
    state.bind(pod("x", cpu=8_000, gpus=1, milli=470), 0, [0])
    return state


def test_a_pod_that_would_leave_a_dead_sliver_opens_a_fresh_gpu_where_fgd_does_not() -> None:
    state = _half_and_fresh()
    small = pod("p", cpu=4_000, gpus=1, milli=320)  # on the 530 share it would leave 210, which nothing common fits
    nodes = np.arange(2)
    fgd = FgdScore(CompiledWorkload(TargetWorkload.from_pods(MIX), state.models)).score(state, small, nodes)
    assert fgd[0] > fgd[1]
    ours = LookaheadScore(LookaheadModel.from_pods(MIX, state.models)).score(state, small, nodes)
    assert ours[1] > ours[0]
    without_gaps = LookaheadScore(LookaheadModel.from_pods(MIX, state.models, gap_weight=0)).score(state, small, nodes)
    assert without_gaps[0] > without_gaps[1]  # the gap tables make the difference


@pytest.mark.parametrize("gap_weight", [0.0, 8.0, 1000.0], ids=["off", "default", "huge"])
def test_the_natural_partner_closes_a_share_however_heavy_the_gap_weight(gap_weight: float) -> None:
    state = _half_and_fresh()
    partner = pod("p", cpu=8_000, gpus=1, milli=470)  # 530 -> 60: the best the workload offers that share
    model = LookaheadModel.from_pods(MIX, state.models, gap_weight=gap_weight)
    scores = LookaheadScore(model).score(state, partner, np.arange(2))
    assert scores[0] > scores[1]


def test_inside_a_node_the_gpu_choice_follows_the_gap_tables() -> None:
    state = cluster(node("n", gpus=2, cpu=96_000))
    state.bind(pod("x", cpu=8_000, gpus=1, milli=470), 0, [0])
    gpu = LookaheadGpu(LookaheadModel.from_pods(MIX, state.models))
    assert gpu.pick(state, pod("t", cpu=4_000, gpus=1, milli=320), 0) == (1,)
    assert gpu.pick(state, pod("h", cpu=8_000, gpus=1, milli=470), 0) == (0,)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"gap_weight": -1.0}, "gap weight"), ({"gap_weight": float("nan")}, "gap weight"), ({"horizon": 0}, "horizon")],
    ids=["negative-weight", "nan-weight", "zero-horizon"],
)
def test_bad_lookahead_knobs_are_rejected_naming_them(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        LookaheadModel.from_pods(MIX, ("G2",), **kwargs)  # type: ignore[arg-type]


def test_policy_options_reach_the_lookahead_model() -> None:
    state = _half_and_fresh()
    options = PolicyOptions(horizon=7, gap_weight=3.0, scarcity=False)
    profile = build_profile("lookahead", state, TargetWorkload.from_pods(MIX), MIX, np.random.default_rng(0), options)
    scorer = profile.scorers[0][0]
    assert isinstance(scorer, LookaheadScore)
    assert scorer.model.gaps is not None and scorer.model.gaps.horizon == 7 and scorer.model.gap_weight == 3.0
    assert scorer.model.scarcity is None


def test_scores_are_fgds_sigmoid_of_the_drop_while_some_node_loses_nothing() -> None:
    scorer = LookaheadScore(LookaheadModel.from_pods(WORKLOAD, ("G2",)))
    deltas = np.array([2500.0, 0.0, -900.0, -6000.0])
    raw = np.round(deltas * RAW_SCALE).astype(np.int64)
    assert scorer.normalize(raw).tolist() == sigmoid_score(deltas).tolist() == [92, 50, 28, 0]


def test_a_loss_every_node_has_does_not_flatten_the_ranking_into_a_tie() -> None:
    scorer = LookaheadScore(LookaheadModel.from_pods(WORKLOAD, ("G2",)))
    deltas = np.array([-5000.0, -6000.0, -9000.0])  # FGD's scale scores all three 0: the tie-break would choose
    assert sigmoid_score(deltas).tolist() == [0, 0, 0]
    scores = scorer.normalize(np.round(deltas * RAW_SCALE).astype(np.int64))
    # The 5000 lost wherever the pod goes are taken from all: the best scores as a node that loses nothing.
    assert scores.tolist() == sigmoid_score(deltas + 5000).tolist() == [50, 26, 1]
