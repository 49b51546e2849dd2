"""The built-in cluster and workload carry the trace's published shape."""

from __future__ import annotations

import pytest

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.simulate.synthetic import synthetic_nodes, synthetic_pods


def test_full_scale_cluster_is_the_traces_gpu_node_inventory() -> None:
    nodes = synthetic_nodes()
    assert len(nodes) == 1213 and sum(n.gpus for n in nodes) == 6212
    assert sum(n.cpu_milli for n in nodes) == 107_018_000
    assert {n.model for n in nodes} == {"G2", "T4", "G3", "P100", "V100M16", "V100M32", "A10"}


def test_full_scale_workload_has_the_traces_mix() -> None:
    pods = synthetic_pods()
    assert len(pods) == 8152
    cpu_only = sum(1 for p in pods if p.num_gpu == 0) / len(pods)
    fractional = sum(p.total_gpu_milli for p in pods if p.is_fractional) / sum(p.total_gpu_milli for p in pods)
    assert cpu_only == pytest.approx(0.133, abs=0.01)
    assert fractional == pytest.approx(0.285, abs=0.02)
    assert sum(1 for p in pods if p.num_gpu == 8) >= 40


def test_scaled_versions_keep_every_shape_and_bad_scales_are_rejected() -> None:
    assert len({p.shape for p in synthetic_pods(0.05)}) == len({p.shape for p in synthetic_pods()})
    with pytest.raises(InvalidSpec, match="scale must be in"):
        synthetic_nodes(0)
