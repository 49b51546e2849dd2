"""Node and pod specifications reject impossible requests, naming the pod or node and the value."""

from __future__ import annotations

import pytest

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import NodeSpec, PodSpec


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpu_milli": -1}, "cpu_milli must not be negative"),
        ({"num_gpu": 2, "gpu_milli": 500}, "fractional request (500 milli) must ask for one GPU"),
        ({"num_gpu": 1, "gpu_milli": 1500}, "gpu_milli must be within 0..1000"),
        ({"num_gpu": 1, "gpu_milli": 0}, "num_gpu=1 and gpu_milli=0 disagree"),
        ({"num_gpu": 0, "gpu_milli": 300}, "num_gpu=0 and gpu_milli=300 disagree"),
    ],
    ids=["negative-cpu", "two-shared-gpus", "more-than-a-gpu", "gpus-without-share", "share-without-gpus"],
)
def test_impossible_pod_is_rejected_naming_the_pod_and_value(kwargs: dict[str, int], message: str) -> None:
    args = {"name": "p1", "cpu_milli": 1000, **kwargs}
    with pytest.raises(InvalidSpec, match="pod p1") as err:
        PodSpec(**args)  # type: ignore[arg-type]
    assert message in str(err.value)


def test_node_with_gpus_needs_a_model() -> None:
    with pytest.raises(InvalidSpec, match="node n1: has 2 GPUs but no GPU model"):
        NodeSpec("n1", 1000, 1000, 2, "")


@pytest.mark.parametrize(
    ("num_gpu", "milli", "klass", "fractional", "total"),
    [
        (0, 0, "no-gpu", False, 0),
        (1, 470, "share-gpu", True, 470),
        (1, 1000, "1-gpu", False, 1000),
        (8, 1000, "8-gpu", False, 8000),
    ],
    ids=["cpu-only", "fractional", "one-gpu", "eight-gpus"],
)
def test_pod_class_fraction_and_total_follow_its_request(
    num_gpu: int, milli: int, klass: str, fractional: bool, total: int
) -> None:
    p = PodSpec("p", 1000, 0, num_gpu, milli)
    assert (p.affinity_class, p.is_fractional, p.total_gpu_milli) == (klass, fractional, total)


def test_shape_ignores_name_and_memory() -> None:
    a = PodSpec("a", 1000, 10, 1, 500, frozenset({"T4"}))
    b = PodSpec("b", 1000, 99, 1, 500, frozenset({"T4"}))
    assert a.shape == b.shape == (1000, 1, 500, frozenset({"T4"}))
