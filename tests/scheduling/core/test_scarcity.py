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


def test_models_absent_from_the_cluster_neither_form_homes_nor_add_demand() -> None:
    state = cluster(*NODES)
    pods = [*_workload(0.05), *(pod(f"h{i}", gpus=1, models=frozenset({"H100"})) for i in range(50))]
    scarcity = Scarcity.from_pods(pods, state.nodes)
    assert scarcity.homes == (_kinds(scarcity, "T4"),)
    assert scarcity.share[0] == pytest.approx(5 / 150)
