"""Small clusters and pods for the scheduling tests, built in one line each."""

from __future__ import annotations

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.model import NodeSpec, PodSpec


def node(name: str, gpus: int = 8, cpu: int = 96_000, mem: int = 393_216, model: str = "G2") -> NodeSpec:
    return NodeSpec(name, cpu, mem, gpus, model if gpus else "")


def pod(
    name: str,
    cpu: int = 4_000,
    gpus: int = 0,
    milli: int = 0,
    mem: int = 1_024,
    models: frozenset[str] = frozenset(),
    priority: int = 0,
    group: str = "",
    min_member: int = 0,
) -> PodSpec:
    if gpus and not milli:
        milli = 1000
    return PodSpec(name, cpu, mem, gpus, milli, models, priority, group, min_member)


def cluster(*nodes: NodeSpec) -> ClusterState:
    return ClusterState(list(nodes))
