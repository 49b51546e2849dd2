"""``kubegpu simulate``'s engine and the live scheduler agree: the same pods, in the same order, land on the same
nodes and the same GPUs.

A few node shapes of the Alibaba GPU trace (``openb_node_list_gpu_node.csv``: CPU, memory, GPU count and model)
become emulated nodes — a machine profile with that many GPUs of that model, the agent's ``--capacity`` the
node's CPU and memory, the plugin publishing its GPUs — on the in-process API server (or the cluster
``KUBEGPU_TEST_KUBECONFIG`` names). Whole-GPU pods of the trace's pod list run through
:func:`kubegpu.scheduling.simulate.simulator.simulate` with policy ``most-allocated`` and, one at a time in the
simulator's arrival order, through ``kubegpu scheduler`` with the same kube-scheduler scoring (NodeResourcesFit
MostAllocated, cpu 1, memory 1, nvidia.com/gpu 3). Both must place every pod on the same node with the same GPU
indices. The node shapes are distinct, so no decision rests on a tie-break (the two break ties differently).

The same holds for the trace's fractional pods (part of one GPU) on nodes that lend every GPU in shares
(``--gpu-milli all``, the pods asking ``kubegpu.io/gpu-milli``, the live profile weighing that resource as the
simulator weighs GPU): same node, same GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from lightkube.resources.core_v1 import Pod

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.framework import Scheduler
from kubegpu.scheduling.core.model import NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import build_profile
from kubegpu.scheduling.core.workload import TargetWorkload
from kubegpu.scheduling.simulate import simulator, trace
from tests.e2e.gpucluster import GPU, GPU_MILLI, POOL, GpuCluster, running_pod
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until
from tests.shared import shared_path

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

TRACE = ("traces", "alibaba-gpu-v2023")
#: Trace nodes of distinct shapes: (GPUs, model).
SHAPES = ((8, "G2"), (4, "V100M16"), (2, "T4"), (1, "V100M16"))
#: How many trace pods of each GPU count, the first ones by name with no GPU model constraint.
PODS = {1: 6, 2: 2, 4: 1}
#: Nodes lending their GPUs in shares, and how many fractional trace pods (no model constraint) run on them.
SHARE_SHAPES = ((2, "T4"), (1, "V100M16"))
SHARE_PODS = 8
POLICY = "most-allocated"


def scoring(gpu_resource: str) -> dict[str, object]:
    """The live twin of ``most-allocated``: NodeResourcesFit MostAllocated, cpu 1, memory 1, GPUs 3."""
    weights = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": gpu_resource, "weight": 3}]
    return {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": weights}}}


SEED = 7
UNPLACED = ("", ())


def trace_nodes(shapes: tuple[tuple[int, str], ...] = SHAPES) -> list[NodeSpec]:
    nodes = trace.read_nodes(shared_path(*TRACE, "openb_node_list_gpu_node.csv"))
    chosen: list[NodeSpec] = []
    for gpus, model in shapes:
        chosen.append(next(n for n in nodes if n.gpus == gpus and n.model == model))
    return chosen


def trace_pods(shares: bool = False) -> list[PodSpec]:
    pods = sorted(trace.read_pods(shared_path(*TRACE, "openb_pod_list_default.csv")), key=lambda p: p.name)
    if shares:
        return [p for p in pods if p.num_gpu == 1 and p.gpu_milli < 1000 and not p.gpu_models][:SHARE_PODS]
    chosen: list[PodSpec] = []
    for gpus, count in PODS.items():
        whole = [p for p in pods if p.num_gpu == gpus and p.gpu_milli == 1000 and not p.gpu_models]
        chosen.extend(whole[:count])
    return chosen


def machine_profile(node: NodeSpec, root: Path) -> str:
    """A simulated machine with the node's GPUs (PCIe, one NUMA node: the trace says nothing of links)."""
    path = root / f"{node.name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": node.name,
                "description": f"trace node {node.name}: {node.gpus}x {node.model}",
                "machine_type": "trace node",
                "driver_version": "535.183.01",
                "cuda_driver_version": "12.2",
                "gpu": {
                    "product_name": node.model,
                    "memory_mib": 16384,
                    "compute_capability": "7.0",
                    "mig_capable": False,
                    "power_limit_w": 250,
                    "max_sm_clock_mhz": 1530,
                    "max_mem_clock_mhz": 877,
                    "multiprocessors": 80,
                },
                "gpus": [
                    {"pci_bus_id": f"00000000:{0x10 + i:02X}:00.0", "numa": 0, "pcie": ["cpu0", "hb0", f"sw{i}"]}
                    for i in range(node.gpus)
                ],
            }
        )
    )
    return str(path)


def simulated(nodes: list[NodeSpec], pods: list[PodSpec]) -> tuple[list[str], dict[str, tuple[str, tuple[int, ...]]]]:
    """The simulator's arrival order and, per placed pod, (node name, GPU indices); nothing inflated or dropped."""
    total = sum(n.gpus for n in nodes) * 1000
    load = sum(p.total_gpu_milli for p in pods) / total  # exactly the pods: nothing added, nothing dropped
    order: list[str] = []
    final: dict[str, tuple[str, tuple[int, ...]]] = {}

    def observe(i: int, pod: PodSpec, state: ClusterState) -> None:
        order.append(pod.name)
        for name, binding in state.bindings.items():
            final[name] = (state.nodes[binding.node].name, binding.gpus)

    result = simulator.simulate(nodes, pods, POLICY, SEED, target_load=load, observer=observe)
    assert sorted(order) == sorted(p.name for p in pods)
    assert not ties(nodes, pods, order), "a decision rests on a tie-break, which the two make differently"
    assert result.failed < len(pods) // 2, "the pods should mostly fit: the comparison is about placements"
    return order, final


def ties(nodes: list[NodeSpec], pods: list[PodSpec], order: list[str]) -> list[str]:
    """Pods whose best node the policy's score does not single out, replaying ``order`` through the core."""
    state = ClusterState(nodes)
    rng = np.random.default_rng(SEED)
    scheduler = Scheduler(state, build_profile(POLICY, state, TargetWorkload.from_pods(pods), pods, rng), rng)
    by_name = {p.name: p for p in pods}
    tied: list[str] = []
    for name in order:
        feasible, _ = scheduler.feasible(by_name[name])
        if len(feasible) > 1:
            scores = scheduler.scores(by_name[name], feasible)
            if int((scores == scores.max()).sum()) > 1:
                tied.append(name)
        scheduler.schedule(by_name[name])
    return tied


@pytest.fixture(params=["whole", "shares"])
def cluster(
    kube: KubeEnv, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[GpuCluster, list[NodeSpec]]]:
    shares = request.param == "shares"
    nodes = trace_nodes(SHARE_SHAPES if shares else SHAPES)
    with GpuCluster(
        kube,
        tmp_path,
        [machine_profile(n, tmp_path) for n in nodes],
        score=[{"name": "NodeResourcesFit", "weight": 1}],
        plugin_config=[scoring(GPU_MILLI if shares else GPU)],
        plugin_args=("--gpu-milli", "all") if shares else (),
        agent_args=[["--capacity", f"cpu={n.cpu_milli}m,memory={n.memory_mib}Mi"] for n in nodes],
    ) as cluster:
        cluster.wait_ready()
        for name, node in zip(cluster.nodes, nodes, strict=True):  # the plugin registers the units as they come
            wait_until(
                lambda name=name, node=node: milli_allocatable(cluster, name) == (1000 * node.gpus if shares else 0),
                within=60,
                what=f"node {name} with its {GPU_MILLI} allocatable",
            )
        yield cluster, nodes


def milli_allocatable(cluster: GpuCluster, name: str) -> int:
    got = cluster.node_object(name)
    allocatable = (got.status.allocatable if got and got.status else None) or {}
    return int(allocatable.get(GPU_MILLI, "0"))


def test_simulate_and_the_live_scheduler_place_the_same_pods_on_the_same_nodes_and_gpus(
    kube: KubeEnv, cluster: tuple[GpuCluster, list[NodeSpec]]
) -> None:
    live, nodes = cluster
    shares = bool(live.plugin_args)
    pods = {p.name: p for p in trace_pods(shares)}
    order, expected = simulated(nodes, list(pods.values()))
    node_of = dict(zip(live.nodes, (n.name for n in nodes), strict=True))  # emulated node -> trace node
    client = kube.client()
    got: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name in order:
        pod = pods[name]
        client.create(
            Pod.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name},
                    "spec": {
                        "schedulerName": live.profile,
                        "nodeSelector": {POOL: kube.namespace},
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "x",
                                "resources": {
                                    "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"},
                                    "limits": {GPU_MILLI: pod.gpu_milli} if shares else {GPU: pod.num_gpu},
                                },
                            }
                        ],
                    },
                }
            )
        )
        if name not in expected:  # the simulator found no node: the live scheduler must say so too
            wait_until(lambda name=name: unschedulable(live, name), within=30, what=f"pod {name} Unschedulable")
            got[name] = UNPLACED
            continue
        running = running_pod(live.wait_running(name))
        index = live.nodes[running.node].uuid_index()
        assert sorted(running.main) == sorted(running.chosen)
        got[name] = (node_of[running.node], tuple(sorted(index[d] for d in running.chosen)))
        if got[name] != expected[name]:
            break  # the first divergence is the one to explain; later pods see different clusters
    assert got == {n: expected.get(n, UNPLACED) for n in got}, f"arrival order {order}"
    assert len(got) == len(order)


def unschedulable(live: GpuCluster, name: str) -> bool:
    pod = live.get(name)
    conditions = (pod.status.conditions if pod and pod.status else None) or []
    bound = bool(pod and pod.spec and pod.spec.nodeName)
    return not bound and any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)
