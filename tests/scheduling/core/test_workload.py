"""The target workload keeps the most popular shapes covering the threshold, renormalised."""

from __future__ import annotations

import pytest

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import PodSpec
from kubegpu.scheduling.core.workload import TargetWorkload
from tests.scheduling.helpers import pod


def pods_of(counts: dict[tuple[int, int, int], int]) -> list[PodSpec]:
    out: list[PodSpec] = []
    for (cpu, gpus, milli), n in counts.items():
        out += [pod(f"p{len(out) + i}", cpu=cpu, gpus=gpus, milli=milli) for i in range(n)]
    return out


def test_prefix_covering_the_threshold_is_kept_and_renormalised() -> None:
    pods = pods_of({(1000, 1, 1000): 60, (2000, 1, 500): 30, (3000, 0, 0): 6, (4000, 8, 1000): 4})
    target = TargetWorkload.from_pods(pods, threshold=0.95)
    # 60 + 30 = 90 % < 95 %, + 6 = 96 % >= 95 %: three shapes, weights over 96 pods
    assert [s[:3] for s in target.shapes] == [(1000, 1, 1000), (2000, 1, 500), (3000, 0, 0)]
    assert target.weights == pytest.approx((60 / 96, 30 / 96, 6 / 96))


def test_equally_popular_shapes_order_by_cpu_then_share_descending() -> None:
    pods = pods_of({(1000, 1, 500): 5, (2000, 1, 300): 5, (2000, 1, 700): 5})
    target = TargetWorkload.from_pods(pods, threshold=1.0)
    assert [s[:3] for s in target.shapes] == [(2000, 1, 700), (2000, 1, 300), (1000, 1, 500)]


def test_cpu_only_pods_can_be_left_out_and_weights_can_count_gpu_demand() -> None:
    pods = pods_of({(1000, 1, 500): 2, (1000, 2, 1000): 1, (3000, 0, 0): 5})
    assert len(TargetWorkload.from_pods(pods, include_cpu_only=False).shapes) == 2
    target = TargetWorkload.from_pods(pods, threshold=1.0, weight=lambda p: float(p.total_gpu_milli))
    assert dict(zip([s[:3] for s in target.shapes], target.weights, strict=True)) == pytest.approx(
        {(1000, 2, 1000): 2000 / 3000, (1000, 1, 500): 1000 / 3000}
    )


@pytest.mark.parametrize("threshold", [0.0, 1.5], ids=["zero", "above-one"])
def test_threshold_outside_zero_one_is_rejected(threshold: float) -> None:
    with pytest.raises(InvalidSpec, match="popularity threshold"):
        TargetWorkload.from_pods([pod("p")], threshold=threshold)
