"""Trace variants: multi-GPU and model-constrained shares reached as the paper built them, the rest untouched."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import PodSpec
from kubegpu.scheduling.simulate.variants import (
    constrained_share,
    model_constrained_variant,
    multi_gpu_share,
    multi_gpu_variant,
    spec_mix,
)
from tests.scheduling.helpers import pod

# 40 CPU-only pods, 50 fractional, 40 one-GPU, 2 two-GPU, 1 eight-GPU: 118 GPUs asked, 12 of them multi-GPU.
BASE = (
    [pod(f"c{i}", cpu=8_000) for i in range(40)]
    + [pod(f"f{i}", gpus=1, milli=(470, 810)[i % 2]) for i in range(50)]
    + [pod(f"w{i}", gpus=1) for i in range(40)]
    + [pod(f"m{i}", cpu=16_000, gpus=2) for i in range(2)]
    + [pod("big", cpu=88_000, gpus=8, mem=327_680)]
)
MIX = {1: (frozenset({"T4"}), frozenset({"T4"}), frozenset({"P100", "V100M16"})), 8: (frozenset({"G2"}),)}


@pytest.mark.parametrize("share", [0.2, 0.3, 0.4, 0.5])
def test_multi_gpu_variant_reaches_the_share_with_copies_of_the_lists_own_multi_gpu_pods(share: float) -> None:
    out = multi_gpu_variant(BASE, share, np.random.default_rng(7))
    assert out[: len(BASE)] == BASE
    extra = out[len(BASE) :]
    assert extra and all(p.num_gpu >= 2 for p in extra)
    assert {(p.cpu_milli, p.memory_mib, p.num_gpu) for p in extra} <= {(16_000, 1_024, 2), (88_000, 327_680, 8)}
    assert multi_gpu_share(out) >= share > multi_gpu_share(out[:-1])  # stops at the first pod that reaches it
    assert len({p.name for p in out}) == len(out)


@pytest.mark.parametrize("share", [0.05, 0.10, 0.20, 0.25, 0.34])
def test_model_constrained_variant_constrains_that_share_of_gpu_pods_from_the_mix(share: float) -> None:
    out = model_constrained_variant(BASE, share, MIX, np.random.default_rng(3))
    assert [(p.name, p.cpu_milli, p.num_gpu, p.gpu_milli) for p in out] == [
        (p.name, p.cpu_milli, p.num_gpu, p.gpu_milli) for p in BASE
    ]
    gpu_pods = [p for p in out if p.num_gpu]
    assert sum(1 for p in gpu_pods if p.gpu_models) == round(share * len(gpu_pods))
    assert all(not p.gpu_models for p in out if not p.num_gpu)
    assert all(p.gpu_models in MIX[1] for p in out if p.gpu_models and p.num_gpu == 1)
    assert all(p.gpu_models in MIX[8] for p in out if p.gpu_models and p.num_gpu > 1)  # a 2-GPU pod: next larger count


def test_constraints_already_in_the_list_are_replaced_so_the_share_is_exact() -> None:
    t4 = frozenset({"T4"})
    constrained = [PodSpec(p.name, p.cpu_milli, 0, p.num_gpu, p.gpu_milli, t4) for p in BASE if p.num_gpu]
    out = model_constrained_variant(constrained, 0.1, MIX, np.random.default_rng(0))
    assert constrained_share(out) == pytest.approx(round(0.1 * len(constrained)) / len(constrained))


def test_spec_mix_keeps_each_constrained_pods_models_by_gpu_count() -> None:
    pods = [pod("a", gpus=1, models=frozenset({"T4"})), pod("b", gpus=8, models=frozenset({"G2"})), pod("c", gpus=1)]
    assert spec_mix(pods) == {1: (frozenset({"T4"}),), 8: (frozenset({"G2"}),)}


@pytest.mark.parametrize(
    ("pods", "share", "message"),
    [
        (BASE, 0.0, r"within \(0, 1\)"),
        (BASE, 1.0, r"within \(0, 1\)"),
        ([pod("c", cpu=1_000), pod("w", gpus=1)], 0.3, "no multi-GPU pod"),
    ],
    ids=["zero", "all", "no-multi-gpu-pods"],
)
def test_multi_gpu_variant_rejects_what_it_cannot_build(pods: list[PodSpec], share: float, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        multi_gpu_variant(pods, share, np.random.default_rng(0))


def test_model_constrained_variant_needs_a_constraint_for_every_gpu_count() -> None:
    with pytest.raises(InvalidSpec, match=r"no constraint for a [28]-GPU pod"):
        model_constrained_variant(BASE, 0.99, {1: MIX[1]}, np.random.default_rng(0))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 0.6))
def test_every_draw_keeps_the_original_pods_and_only_adds_multi_gpu_ones(seed: int, share: float) -> None:
    out = multi_gpu_variant(BASE, share, np.random.default_rng(seed))
    assert out[: len(BASE)] == BASE and multi_gpu_share(out) >= share
