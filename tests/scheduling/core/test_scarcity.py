"""The scarcity term: pressure on the nodes some pods need, and who pays it where."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.model import PodSpec
from kubegpu.scheduling.core.scarcity import PRESSURE_STEPS, Scarcity
from tests.scheduling.helpers import cluster, node, pod

T4 = frozenset({"T4"})
V100 = frozenset({"V100M16", "V100M32"})
# Two T4 nodes (4 GPUs), two G2 nodes (16 GPUs, 96 cores), one V100M32 node (4 GPUs), one G3 node (8 GPUs, 128 cores).
NODES = (
    node("t0", gpus=2, cpu=104_000, model="T4"),
    node("t1", gpus=2, cpu=104_000, model="T4"),
    node("g0", model="G2"),
    node("g1", model="G2"),
    node("v0", gpus=4, model="V100M32"),
    node("h0", gpus=8, cpu=128_000, model="G3"),
)


def _workload(t4_share: float, v100_share: float = 0.0) -> list[PodSpec]:
    """100 one-GPU pods, the given shares bound to T4 and to the V100s, the rest free to go anywhere."""
    t4, v100 = round(100 * t4_share), round(100 * v100_share)
    return [
        *(pod(f"t{i}", gpus=1, models=T4) for i in range(t4)),
        *(pod(f"v{i}", gpus=1, models=V100) for i in range(v100)),
        *(pod(f"a{i}", gpus=1) for i in range(100 - t4 - v100)),
        pod("cpu", cpu=2_000),
    ]


def _kinds(scarcity: Scarcity, *models: str) -> frozenset[int]:
    return frozenset(k for k, kind in enumerate(scarcity.kinds) if kind[0] in models)


@pytest.mark.parametrize(
    ("t4_share", "pressure"),
    [
        (0.0, None),  # no pod bound anywhere: no home, no pressure
        (0.05, 0.05 * 32 / 4),  # 5 % of 32 free GPUs to come is 1.6 GPUs for T4's 4 free: 0.4
        (0.13, 1.0),  # just more than T4's 4 free GPUs (4.16)
        (0.5, 1.0),  # more than T4 has: capped at 1
    ],
    ids=["none", "light", "just-over", "oversubscribed"],
)
def test_pressure_is_the_bound_share_of_the_capacity_to_come_over_what_the_home_has_free(
    t4_share: float, pressure: float | None
) -> None:
    state = cluster(*NODES)
    scarcity = Scarcity.from_pods(_workload(t4_share), state.nodes)
    if pressure is None:
        assert scarcity.homes == () and len(scarcity.pressure(state)) == 0
        return
    assert scarcity.homes == (_kinds(scarcity, "T4"),)
    assert scarcity.pressure(state)[0] == pytest.approx(round(pressure * PRESSURE_STEPS) / PRESSURE_STEPS)


def test_pods_that_could_go_elsewhere_pay_on_scarce_nodes_and_pods_at_home_do_not() -> None:
    state = cluster(*NODES)
    scarcity = Scarcity.from_pods(_workload(0.5), state.nodes)
    nodes = np.arange(state.size)
    rho = scarcity.cpu_per_milli[0]  # 4 cores per 1000 milli for the T4 pods
    anywhere = scarcity.penalty(state, pod("x", cpu=4_000, gpus=1), nodes)
    assert anywhere.tolist() == pytest.approx([1000 + 4000 / rho] * 2 + [0.0] * 4)
    assert scarcity.penalty(state, pod("t", gpus=1, models=T4), nodes).tolist() == [0.0] * 6
    cpu_only = scarcity.penalty(state, pod("c", cpu=8_000), nodes)  # takes the CPU that would feed 2 T4 GPUs
    assert cpu_only.tolist() == pytest.approx([8000 / rho] * 2 + [0.0] * 4)


def test_an_eight_gpu_pod_asking_more_cpu_than_most_nodes_have_is_at_home_only_where_it_fits() -> None:
    state = cluster(*NODES)
    pods = [pod("big", cpu=120_000, gpus=8), *(pod(f"a{i}", gpus=1) for i in range(24))]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    assert scarcity.homes == (_kinds(scarcity, "G3"),)
    assert scarcity.share[0] == pytest.approx(8 / 32)
    nodes = np.arange(state.size)
    assert (
        scarcity.penalty(state, pod("x", gpus=1), nodes)[5] > 0 == scarcity.penalty(state, pod("x", gpus=1), nodes)[2]
    )
    state.bind(pod("y", cpu=20_000), 5)  # the G3 node can no longer take the 120-core pod: nothing left to keep
    assert scarcity.usable(state)[0] == 0 and scarcity.pressure(state)[0] == 0


def test_a_pod_allowed_on_a_wider_set_pays_only_for_the_narrower_homes_it_could_leave() -> None:
    state = cluster(*NODES)
    pods = [*_workload(0.4, 0.4), pod("t4v", gpus=1, models=T4 | V100)]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    t4, v100 = _kinds(scarcity, "T4"), _kinds(scarcity, "V100M32")
    assert set(scarcity.homes) == {t4, v100, t4 | v100}
    nodes = np.arange(state.size)
    wide = scarcity.penalty(state, pod("w", gpus=1, models=T4 | V100), nodes)
    assert wide[0] > 0 and wide[4] > 0  # it could leave T4 and the V100 to the pods bound there
    assert scarcity.penalty(state, pod("n", gpus=1, models=V100), nodes)[4] == 0.0


def test_pressure_falls_as_the_capacity_to_come_shrinks_elsewhere() -> None:
    state = cluster(*NODES)
    scarcity = Scarcity.from_pods(_workload(0.05), state.nodes)
    before = scarcity.pressure(state)[0]
    for gpu in range(6):  # six GPUs taken on a G2 node: less capacity to come, the same T4 free
        state.bind(pod(f"x{gpu}", gpus=1), state.index["g0"], (gpu,))
    assert scarcity.pressure(state)[0] < before


def test_the_capacity_to_come_is_what_the_free_cpu_can_feed_when_cpu_runs_out_before_the_gpus() -> None:
    state = cluster(*NODES)  # 32 GPUs, 624 cores
    hungry = [*_workload(0.05), *(pod(f"c{i}", cpu=36_000) for i in range(100))]  # 40.02 CPU milli per GPU-milli
    scarcity = Scarcity.from_pods(hungry, state.nodes)
    assert scarcity.to_come(state) == pytest.approx(624_000 / 40.02)
    expected = 0.05 * (624_000 / 40.02) / 4_000  # T4's pods' share of what the CPU can still feed, over T4's 4 GPUs
    assert scarcity.pressure(state)[0] == round(expected * PRESSURE_STEPS) / PRESSURE_STEPS
    before = scarcity.pressure(state)[0]
    state.bind(pod("cpu-only", cpu=96_000), state.index["g0"])  # no GPU taken, yet less to come
    assert scarcity.pressure(state)[0] < before
    # Where the GPUs run out first, CPU-only pods taking CPU leave the capacity to come as it was.
    light = Scarcity.from_pods(_workload(0.05), state.nodes)
    assert light.to_come(state) == state.total_gpu_milli


def test_a_node_counts_for_a_home_at_the_share_of_its_pods_that_still_fit_there() -> None:
    state = cluster(*NODES)
    pods = [
        *(pod(f"light{i}", cpu=4_000, gpus=1, models=T4) for i in range(5)),
        *(pod(f"heavy{i}", cpu=40_000, gpus=1, models=T4) for i in range(5)),
        *(pod(f"a{i}", gpus=1) for i in range(90)),
    ]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    assert scarcity.usable(state).tolist() == [4000.0]  # both T4 nodes fit every T4 pod
    state.bind(pod("cpu-only", cpu=70_000), state.index["t0"])  # 34 cores left: the light half fits, the heavy not
    assert scarcity.usable(state).tolist() == [2000.0 + 0.5 * 2000.0]
    state.bind(pod("more", cpu=31_000), state.index["t0"])  # 3 cores left: no T4 pod fits any more
    assert scarcity.usable(state).tolist() == [2000.0]


def test_models_absent_from_the_cluster_neither_form_homes_nor_add_demand() -> None:
    state = cluster(*NODES)
    pods = [*_workload(0.05), *(pod(f"h{i}", gpus=1, models=frozenset({"H100"})) for i in range(50))]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    assert scarcity.homes == (_kinds(scarcity, "T4"),)
    assert scarcity.share[0] == pytest.approx(5 / 150)


def _g3_only() -> tuple[Scarcity, np.ndarray]:
    """The one G3 node is the only home of a 120-core 8-GPU pod that asks an eighth of the GPU."""
    state = cluster(*NODES)
    pods = [pod("big", cpu=120_000, gpus=8), *(pod(f"a{i}", gpus=1) for i in range(56))]
    return Scarcity.from_pods(pods, state.nodes), np.arange(state.size)


@pytest.mark.parametrize(
    ("placed", "cpu", "gpus", "milli", "expect"),
    [
        ("nothing", 0, 1, 1000, "whole node"),  # a 1-GPU pod breaks the only node the 8-GPU pod fits: all 8000 lost
        ("nothing", 16_000, 0, 0, "whole node"),  # a CPU-only pod leaving 112 cores breaks it too
        ("nothing", 4_000, 0, 0, "cpu"),  # 124 cores left: it still takes the 8-GPU pod, only the CPU counts
        ("a GPU", 0, 1, 1000, "nothing"),  # already broken: nothing left there to keep for the 8-GPU pod
    ],
    ids=["gpu-breaks", "cpu-breaks", "cpu-keeps", "already-broken"],
)
def test_a_placement_that_breaks_the_last_home_of_some_pods_pays_for_the_rest_at_the_pressure_beyond_their_weight(
    placed: str, cpu: int, gpus: int, milli: int, expect: str
) -> None:
    scarcity, nodes = _g3_only()
    state = cluster(*NODES)
    g3 = state.index["h0"]
    if placed == "a GPU":
        state.bind(pod("used", gpus=1), g3, (0,))
    p = scarcity.pressure(state)[0]
    x = pod("x", cpu=cpu, gpus=gpus, milli=milli) if gpus else pod("x", cpu=cpu)
    got = scarcity.penalty(state, x, nodes)
    assert got[state.index["g0"]] == 0.0  # a G2 node is no home of the 8-GPU pod
    taken = gpus * milli + cpu / scarcity.cpu_per_milli[0]
    beyond = p - scarcity.counted[0]  # 0.5 - 1/57: the fragmentation measure counts the rest at the pods' share
    want = {"whole node": p * taken + beyond * (8000 - taken), "cpu": p * taken, "nothing": 0.0}[expect]
    assert got[g3] == pytest.approx(want)
    if expect != "nothing":
        assert p > 0


def test_a_fractional_pod_breaks_a_home_only_on_a_gpu_whose_share_it_takes_below_what_the_home_asks() -> None:
    state = cluster(*NODES)
    t4 = [pod(f"t{i}", gpus=1, milli=500, models=T4) for i in range(50)]
    pods = [*t4, *(pod(f"a{i}", gpus=1) for i in range(50))]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    t0 = state.index["t0"]
    state.bind(pod("full", gpus=1), t0, (0,))  # t0 keeps one free T4 GPU: the last 500-milli share it can give
    nodes = np.array([t0, t0])
    frac = pod("f", cpu=0, gpus=1, milli=600)
    got = scarcity.penalty(state, frac, nodes, free=np.array([1000, 1000]))
    p, counted = scarcity.pressure(state)[0], scarcity.counted[0]
    assert p > counted
    # 400 left < 500: the node's last 1000 milli for T4 pods are lost, 600 taken and 400 broken
    assert got.tolist() == pytest.approx([p * 600 + (p - counted) * 400] * 2)
    small = pod("s", cpu=0, gpus=1, milli=400)
    assert scarcity.penalty(state, small, nodes[:1], free=np.array([1000])).tolist() == pytest.approx([p * 400])


@pytest.mark.parametrize("by_pods", [True, False], ids=["pod-count", "gpu-request"])
def test_the_break_is_charged_beyond_the_weight_the_fragmentation_measure_already_gives_the_home(by_pods: bool) -> None:
    state = cluster(*NODES)
    pods = [pod("big", cpu=120_000, gpus=8), *(pod(f"a{i}", gpus=1) for i in range(56))]
    scarcity = Scarcity.from_pods(pods, state.nodes, counted_by_pods=by_pods)
    assert scarcity.share[0] == pytest.approx(8 / 64)  # the 8-GPU pod's share of the GPU request
    assert scarcity.counted[0] == pytest.approx(1 / 57 if by_pods else 8 / 64)


def test_a_one_gpu_pod_bound_to_the_same_nodes_pays_for_breaking_the_whole_node_an_eight_gpu_pod_needs() -> None:
    state = cluster(*NODES)
    g3 = frozenset({"G3"})
    pods = [pod("big", cpu=120_000, gpus=8, models=g3), *(pod(f"s{i}", gpus=1, models=g3) for i in range(4))]
    pods += [pod(f"a{i}", gpus=1) for i in range(20)]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    assert list(zip(scarcity.homes, scarcity.gpus.tolist(), strict=True)) == [
        (_kinds(scarcity, "G3"), 1),
        (_kinds(scarcity, "G3"), 8),
    ]
    h0 = state.index["h0"]
    small = pod("s", gpus=1, models=g3)
    assert scarcity.penalty(state, small, np.array([h0]))[0] > 0  # the last whole G3 node, broken for the 8-GPU pod
    state.bind(pod("used", gpus=1, models=g3), h0, (0,))
    assert scarcity.penalty(state, small, np.array([h0]))[0] == 0.0  # already broken: at home, nothing to keep


def test_usable_capacity_kept_incrementally_equals_a_fresh_count() -> None:
    state = cluster(*NODES)
    scarcity = Scarcity.from_pods([*_workload(0.3), pod("big", cpu=120_000, gpus=8)], state.nodes)
    moves = [("t0", 1, (0,)), ("h0", 1, (3,)), ("g0", 2, (0, 1)), ("t1", 1, (1,))]
    bound = []
    for name, gpus, ids in moves:
        p = pod(f"p{name}", gpus=gpus)
        state.bind(p, state.index[name], ids)
        bound.append(p)
        fresh = Scarcity.from_pods([*_workload(0.3), pod("big", cpu=120_000, gpus=8)], state.nodes)
        assert scarcity.usable(state).tolist() == fresh.usable(state).tolist()
        assert scarcity.pressure(state).tolist() == fresh.pressure(state).tolist()
    state.unbind(bound[0].name)
    fresh = Scarcity.from_pods([*_workload(0.3), pod("big", cpu=120_000, gpus=8)], state.nodes)
    assert scarcity.usable(state).tolist() == fresh.usable(state).tolist()
