"""The k-pod gap tables: stranded share and natural-partner residue, against hand-computed values and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.gaps import GapTables
from kubegpu.scheduling.core.model import MILLI
from tests.scheduling.helpers import pod


def _shares(**sizes: float) -> np.ndarray:
    share = np.zeros(MILLI + 1)
    for key, value in sizes.items():
        share[int(key.removeprefix("d"))] = value
    return share


# 30 % of pods ask 0.47 GPU, 10 % 0.32, 40 % a whole GPU, 20 % no GPU; ten pods ahead:
# P(d <= g) is 0 below 320, 0.1 up to 469, 0.4 up to 999; 0.47 and 0.32 are common (1 - 0.7^10, 1 - 0.9^10 >= 1/2).
MIX = GapTables.from_distribution(_shares(d470=0.3, d320=0.1, d1000=0.4), horizon=10)


@pytest.mark.parametrize(
    ("free", "expected"),
    [
        (0, 0.0),
        (210, 210.0),  # nothing in the mix fits 210: all of it stays stranded
        (350, 350 * 0.9**10),  # only the 0.32 pods fit: stranded unless one of ten pods is one
        (530, 530 * 0.6**10),
        (999, 999 * 0.6**10),
        (1000, 0.0),  # a fully free GPU is not a gap: whole-GPU pods take it
    ],
    ids=["empty", "too-small-for-all", "fits-only-0.32", "fits-0.47", "almost-whole", "fully-free"],
)
def test_stranded_is_the_share_none_of_the_next_k_pods_can_use(free: int, expected: float) -> None:
    assert MIX.stranded[free] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("free", "expected"),
    [(1000, 0), (530, 60), (469, 149), (350, 30), (319, 319)],
    ids=["whole-pod", "0.47-closes-530", "0.32-below-0.47", "0.32-closes-350", "no-common-size-fits"],
)
def test_residue_is_what_the_largest_common_size_leaves(free: int, expected: int) -> None:
    assert MIX.residue[free] == expected


@pytest.mark.parametrize(
    ("free", "milli", "expected"),
    [
        (530, 470, 0.0),  # natural partner: 60 left is the best the mix offers, never a loss
        (530, 320, 530 * 0.6**10 - 210),  # leaves 210 nothing common fits: loses almost all of it
        (1000, 320, -680 * 0.6**10),  # opening a fresh GPU for 0.32: 680 left, very likely closed
        (1000, 470, -530 * 0.6**10),
        (350, 320, 350 * 0.9**10 - 30),  # natural and a gain: kept
        (350, 100, 350 * 0.9**10 - 250),  # an odd size turning 350 into a dead 250
    ],
    ids=["natural-closure", "avoidable-sliver", "open-for-0.32", "open-for-0.47", "natural-gain", "odd-size"],
)
def test_gain_counts_avoidable_slivers_and_never_a_natural_closure(free: int, milli: int, expected: float) -> None:
    assert MIX.gain(np.array([free]), milli)[0] == pytest.approx(expected)


def test_from_pods_counts_cpu_only_pods_in_the_distribution() -> None:
    pods = [pod("h", cpu=1000, gpus=1, milli=500), pod("c", cpu=1000)]
    tables = GapTables.from_pods(pods, horizon=1)
    assert tables.stranded[499] == 499  # nothing fits below 500
    assert tables.stranded[600] == pytest.approx(600 * 0.5)  # half of the pods (the 0.5 ones) fit
    assert tables.residue[600] == 100  # odds 1/2 with one pod ahead: 0.5 is common


def test_longer_horizon_strands_less_of_every_share() -> None:
    short = GapTables.from_distribution(_shares(d470=0.3, d320=0.1, d1000=0.4), horizon=1)
    assert (MIX.stranded <= short.stranded).all()
    assert short.residue[350] == 350  # one pod ahead, 0.32 is a 1-in-10 chance: not common


@pytest.mark.parametrize(
    ("share", "horizon", "message"),
    [
        (_shares(d470=0.3), 0, "at least one pod"),
        (_shares(d470=0.9, d320=0.2), 10, "summing to at most 1"),
        (_shares(d470=-0.1), 10, "non-negative"),
        (np.zeros(10), 10, "1001"),
    ],
    ids=["zero-horizon", "shares-over-one", "negative-share", "wrong-length"],
)
def test_bad_distribution_is_rejected_naming_the_problem(share: np.ndarray, horizon: int, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        GapTables.from_distribution(share, horizon)


def test_no_pods_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="at least one pod"):
        GapTables.from_pods([])


sizes = st.lists(st.integers(min_value=1, max_value=MILLI), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes, cpu_only=st.integers(min_value=0, max_value=5), horizon=st.integers(min_value=1, max_value=200))
def test_tables_stay_within_the_share_and_residue_is_the_largest_common_fit(
    sizes: list[int], cpu_only: int, horizon: int
) -> None:
    pods = [pod(f"g{i}", gpus=1, milli=d) for i, d in enumerate(sizes)] + [pod(f"c{i}") for i in range(cpu_only)]
    tables = GapTables.from_pods(pods, horizon)
    free = np.arange(MILLI + 1)
    assert (tables.stranded >= 0).all() and (tables.stranded <= free + 1e-9).all()
    assert tables.stranded[MILLI] == 0
    assert ((tables.residue >= 0) & (tables.residue <= free)).all()
    for g in range(0, MILLI + 1, 37):
        used = g - int(tables.residue[g])
        assert used == 0 or used in sizes  # the partner is a size of the workload


@settings(max_examples=60, deadline=None)
@given(sizes=sizes, free=st.integers(min_value=1, max_value=MILLI), data=st.data())
def test_a_placement_as_good_as_the_natural_partner_never_loses(
    sizes: list[int], free: int, data: st.DataObject
) -> None:
    tables = GapTables.from_pods([pod(f"g{i}", gpus=1, milli=d) for i, d in enumerate(sizes)], horizon=50)
    milli = data.draw(st.integers(min_value=1, max_value=free))
    gain = float(tables.gain(np.array([free]), milli)[0])
    drop = float(tables.stranded[free] - tables.stranded[free - milli])
    if free - milli <= tables.residue[free]:
        assert gain == max(drop, 0.0) >= 0
    else:
        assert gain == drop
