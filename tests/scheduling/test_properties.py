"""Properties every policy keeps: no over-commit, fractional pods on one GPU, model constraints, seed determinism."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.framework import Scheduler
from kubegpu.scheduling.core.model import MILLI, NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import POLICIES, build_profile
from kubegpu.scheduling.core.workload import TargetWorkload
from kubegpu.scheduling.simulate.simulator import simulate

node_st = st.builds(
    lambda i, gpus, cpu, model: NodeSpec(f"n{i}", cpu, cpu * 4, gpus, model),
    st.integers(),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([8_000, 32_000, 96_000]),
    st.sampled_from(["T4", "G2", "V100M16"]),
)
pod_st = st.builds(
    lambda cpu, req, models: PodSpec("p", cpu, cpu * 2, req[0], req[1], models if req[0] else frozenset()),
    st.sampled_from([1_000, 4_000, 12_000, 30_000]),
    st.sampled_from([(0, 0), (1, 100), (1, 470), (1, 810), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]),
    st.sampled_from([frozenset(), frozenset(), frozenset({"T4"}), frozenset({"G2", "V100M16"})]),
)


def check_invariants(state: ClusterState) -> None:
    cpu = state.cpu_capacity.copy()
    mem = state.memory_capacity.copy()
    gpu = state.gpu_capacity.copy()
    for b in state.bindings.values():
        cpu[b.node] -= b.pod.cpu_milli
        mem[b.node] -= b.pod.memory_mib
        assert len(b.gpus) == b.pod.num_gpu
        if b.pod.is_fractional:
            assert len(b.gpus) == 1
        if b.pod.gpu_models and b.pod.num_gpu:
            assert state.nodes[b.node].model in b.pod.gpu_models
        for g in b.gpus:
            gpu[b.node, g] -= b.pod.gpu_milli
    assert np.array_equal(cpu, state.cpu_free) and (cpu >= 0).all()
    assert np.array_equal(mem, state.memory_free) and (mem >= 0).all()
    assert np.array_equal(gpu, state.gpu_free) and ((gpu >= 0) & (gpu <= MILLI)).all()
    assert state.allocated_gpu_milli == sum(b.pod.total_gpu_milli for b in state.bindings.values())


@settings(max_examples=25, deadline=None)
@given(
    st.lists(node_st, min_size=1, max_size=6, unique_by=lambda n: n.name),
    st.lists(pod_st, min_size=1, max_size=40),
    st.sampled_from(sorted(POLICIES)),
    st.integers(0, 2**32 - 1),
)
def test_no_policy_over_commits_splits_a_fractional_pod_or_breaks_a_model_constraint(
    nodes: list[NodeSpec], pods: list[PodSpec], policy: str, seed: int
) -> None:
    pods = [
        PodSpec(f"p{i}", p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_models) for i, p in enumerate(pods)
    ]
    if not any(p.num_gpu for p in pods):
        pods.append(PodSpec("gpu", 1000, 0, 1, 1000))
    state = ClusterState(nodes)
    rng = np.random.default_rng(seed)
    sched = Scheduler(state, build_profile(policy, state, TargetWorkload.from_pods(pods), pods, rng), rng)
    for p in pods:
        sched.schedule(p)
        check_invariants(state)


def test_the_same_seed_gives_the_same_run_and_another_seed_a_different_one() -> None:
    from kubegpu.scheduling.simulate.synthetic import synthetic_nodes, synthetic_pods

    nodes, pods = synthetic_nodes(0.05), synthetic_pods(0.05)
    for policy in ("lookahead", "random"):
        one = simulate(nodes, pods, policy, 5)
        two = simulate(nodes, pods, policy, 5)
        other = simulate(nodes, pods, policy, 6)
        assert np.array_equal(one.allocated_milli, two.allocated_milli)
        assert np.array_equal(one.fragment_milli, two.fragment_milli)
        assert not np.array_equal(one.allocated_milli, other.allocated_milli)
