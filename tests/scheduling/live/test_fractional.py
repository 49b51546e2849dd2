"""Fractional pods (``kubegpu.io/gpu-milli``) in the live scheduler: refused requests, the filter, the one GPU."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from lightkube.resources.core_v1 import Pod

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.fgd import FgdGpu
from kubegpu.scheduling.core.fragmentation import CompiledWorkload
from kubegpu.scheduling.core.framework import GpuPicker
from kubegpu.scheduling.core.lookahead import LookaheadGpu, LookaheadModel
from kubegpu.scheduling.core.model import NodeSpec
from kubegpu.scheduling.core.workload import TargetWorkload
from kubegpu.scheduling.live import corepolicies, objects
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.cycle import NO_GPU_SHARE, NOT_DESCRIBED, Cycle, FitError, Placement, Profile
from kubegpu.scheduling.live.objects import NodeInfo, PodInfo
from tests.deviceplugin.fixtures.build import plugin_config

from .builders import node, pod_obj

MILLI = "kubegpu.io/gpu-milli"
MACHINE = profiles.load("dgx-a100")
UUID = [g.uuid for g in MACHINE.gpus]


def share_pod(
    name: str,
    *limits: dict[str, str],
    node_name: str = "",
    annotations: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> Pod:
    containers = [
        {"name": f"c{n}", "image": "x", "resources": {"requests": {"cpu": "1", **lim}, "limits": lim}}
        for n, lim in enumerate(limits)
    ]
    obj = pod_obj(name, node=node_name, spec={"containers": containers}, created=created)
    assert obj.metadata is not None
    obj.metadata.annotations = annotations or {}
    return obj


def info(name: str, *limits: dict[str, str], **kw: Any) -> PodInfo:
    return objects.pod_info(share_pod(name, *limits, **kw))


def described(name: str, select: str = "0,1,5") -> NodeInfo:
    served = resource_map.build(MACHINE, plugin_config(["--gpu-milli", select])).resources
    text = nodegpus.node_annotations(nodegpus.describe(MACHINE, served, {}))[nodegpus.GPUS_ANNOTATION]
    assert text is not None
    milli = 1000 * len(select.split(","))
    return dataclasses.replace(node(name, gpus=8 - milli // 1000, extra={MILLI: str(milli)}), gpus_text=text)


PROBLEMS = [
    ("both_forms", [{"nvidia.com/gpu": "1", MILLI: "500"}], "both nvidia.com/gpu and kubegpu.io/gpu-milli"),
    ("both_forms_in_two_containers", [{"nvidia.com/gpu": "1"}, {MILLI: "500"}], "not both"),
    ("zero", [{MILLI: "0"}], "container c0: kubegpu.io/gpu-milli must be 1..1000, got 0"),
    ("more_than_a_gpu", [{MILLI: "1500"}], "asks for 1500 kubegpu.io/gpu-milli, more than one GPU"),
    ("more_than_a_gpu_summed", [{MILLI: "600"}, {MILLI: "600"}], "asks for 1200"),
    ("a_share_is_fine", [{MILLI: "500"}], ""),
    ("whole_gpus_are_fine", [{"nvidia.com/gpu": "2"}], ""),
]


@pytest.mark.parametrize(("limits", "problem"), [r[1:] for r in PROBLEMS], ids=[r[0] for r in PROBLEMS])
def test_requests_no_node_can_satisfy_are_named(limits: list[dict[str, str]], problem: str) -> None:
    got = info("p", *limits).request_problem
    assert (problem in got) if problem else got == ""


def schedule(cache: SchedulerCache, pod: PodInfo, profile: Profile | None = None) -> Placement | FitError:
    return Cycle(np.random.default_rng(0)).schedule(cache, profile or Profile("gpu-scheduler"), pod)


def test_a_share_goes_to_one_gpu_published_for_shares_best_fit() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    first = schedule(cache, info("one", {MILLI: "500"}))
    assert isinstance(first, Placement) and first.gpus == (0,)
    cache.add_pod(first.pod, "a", first.gpus)
    second = schedule(cache, info("two", {MILLI: "500"}))
    assert isinstance(second, Placement) and second.gpus == (0,)  # shares the half-used GPU
    cache.add_pod(second.pod, "a", second.gpus)
    third = schedule(cache, info("three", {MILLI: "600"}))
    assert isinstance(third, Placement) and third.gpus == (1,)
    assert cache.shares_used("a") == {0: 1000}
    assert cache.share_device("a", 1) == UUID[1]


def test_a_pod_bound_by_hand_counts_where_the_plugin_puts_it() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    placed = info("placed", {MILLI: "500"}, node_name="a", annotations={"kubegpu.io/gpu-devices": UUID[5]})
    cache.add_pod(placed, "a", cache.gpu_indices_of(placed, "a"))
    manual = info("manual", {MILLI: "700"}, node_name="a")
    cache.add_pod(manual, "a", cache.gpu_indices_of(manual, "a"))
    assert cache.shares_used("a") == {5: 500, 0: 700}
    decision = schedule(cache, info("p", {MILLI: "400"}))
    assert isinstance(decision, Placement) and decision.gpus == (5,)


def test_pods_bound_by_hand_are_replayed_in_admission_order_among_the_placed_ones() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    for n, (name, gpu) in enumerate([("h1", None), ("h2", None), ("placed", 1)]):
        annotations = {"kubegpu.io/gpu-devices": UUID[gpu]} if gpu is not None else None
        limits = {MILLI: "300" if name == "placed" else "400"}
        pod = info(name, limits, node_name="a", annotations=annotations, created=f"2026-01-01T00:00:0{n}Z")
        cache.add_pod(pod, "a", cache.gpu_indices_of(pod, "a"))
    # h1 and h2 were admitted first, onto GPU 0 by best fit; the placed pod came after, onto GPU 1.
    assert cache.shares_used("a") == {0: 800, 1: 300}


@pytest.mark.parametrize("manual_first", [True, False], ids=["manual_named_first", "manual_named_last"])
def test_within_one_second_a_known_gpu_is_replayed_first(manual_first: bool) -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    placed = info("b-placed", {MILLI: "500"}, node_name="a", annotations={"kubegpu.io/gpu-devices": UUID[0]})
    manual = info("a-manual" if manual_first else "c-manual", {MILLI: "600"}, node_name="a")
    for pod in (placed, manual):
        cache.add_pod(pod, "a", cache.gpu_indices_of(pod, "a"))
    assert cache.shares_used("a") == {0: 500, 1: 600}


def test_a_replay_that_would_over_commit_puts_the_known_gpus_first() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    manual = info("manual", {MILLI: "600"}, node_name="a", created="2026-01-01T00:00:00Z")
    placed = info(
        "placed", {MILLI: "500"}, node_name="a", annotations={"kubegpu.io/gpu-devices": UUID[0]},
        created="2026-01-01T00:00:05Z",
    )  # fmt: skip
    for pod in (manual, placed):
        cache.add_pod(pod, "a", cache.gpu_indices_of(pod, "a"))
    # Oldest first would put the manual pod on GPU 0 and over-commit it: it must have landed elsewhere.
    assert cache.shares_used("a") == {0: 500, 1: 600}


def test_nodes_without_a_description_or_room_on_one_gpu_do_not_fit_and_say_why() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a", select="0,1"))
    cache.set_node(node("plain", gpus=0, extra={MILLI: "8000"}))
    cache.add_pod(info("held", {MILLI: "700"}, node_name="a"), "a", ())  # where best fit puts it: GPU 0
    cache.add_pod(info("other", {MILLI: "700"}, node_name="a"), "a", (1,))  # 600 left on the node, 300 per GPU
    decision = schedule(cache, info("p", {MILLI: "400"}))
    assert isinstance(decision, FitError)
    assert decision.reasons == {NO_GPU_SHARE: 1, NOT_DESCRIBED: 1}
    assert "1 Insufficient kubegpu.io/gpu-milli on any one GPU" in decision.message


def test_whole_gpu_pods_never_get_a_gpu_published_for_shares() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a", select="0,1,2,3,4,5"))
    decision = schedule(cache, objects.pod_info(pod_obj("w", gpus=2)))
    assert isinstance(decision, Placement) and set(decision.gpus) == {6, 7}


def test_the_core_policies_see_a_share_as_part_of_one_gpu_and_score_it() -> None:
    spec = corepolicies.pod_spec(info("p", {MILLI: "250"}))
    assert (spec.num_gpu, spec.gpu_milli, spec.is_fractional) == (1, 250, True)
    assert corepolicies.pod_spec(info("both", {"nvidia.com/gpu": "1", MILLI: "250"})).gpu_milli == 1000
    cache = SchedulerCache()
    cache.set_node(described("a"))
    cache.set_node(described("b"))
    cache.add_pod(info("held", {MILLI: "500"}, node_name="b"), "b", (0,))
    profile = Profile("gpu-scheduler", scorers=((corepolicies.CorePolicyScore("Lookahead"), 1),))
    decision = schedule(cache, info("p", {MILLI: "500"}), profile)
    assert isinstance(decision, Placement) and decision.node == "b" and decision.gpus == (0,)


@pytest.mark.parametrize("policy", ["Lookahead", "FGD"])
def test_a_shares_gpu_is_the_one_the_simulators_picker_of_the_profiles_policy_gives(policy: str) -> None:
    cache = SchedulerCache()
    cache.set_node(described("a"))
    held = info("held", {MILLI: "250"}, node_name="a", annotations={"kubegpu.io/gpu-devices": UUID[5]})
    cache.add_pod(held, "a", (5,))
    pod = info("p", {MILLI: "500"})
    profile = Profile("gpu-scheduler", scorers=((corepolicies.CorePolicyScore(policy), 1),))
    decision = schedule(cache, pod, profile)
    assert isinstance(decision, Placement)

    # The simulator's side, built apart: one 8-GPU node with the held share on GPU 5, the policy's own picker
    # choosing among the GPUs the node lends in shares (0, 1, 5).
    allocatable = cache.nodes["a"].allocatable
    model = cache.nodes["a"].labels.get(objects.GPU_PRODUCT_LABEL) or "unknown"
    state = ClusterState([NodeSpec("a", allocatable["cpu"], allocatable["memory"] // 2**20, 8, model)])
    specs = [corepolicies.pod_spec(held), corepolicies.pod_spec(pod)]
    state.bind(specs[0], 0, [5])
    picker: GpuPicker
    if policy == "Lookahead":
        picker = LookaheadGpu(LookaheadModel.from_pods(specs, state.models, nodes=state.nodes))
    else:
        picker = FgdGpu(CompiledWorkload(TargetWorkload.from_pods(specs), state.models))
    assert decision.gpus == picker.pick(state, specs[1], 0, among=[0, 1, 5])
    best_fit = schedule(cache, pod)
    assert isinstance(best_fit, Placement) and best_fit.gpus == (5,) != decision.gpus  # the policy chose otherwise
