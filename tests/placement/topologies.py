"""go-gpuallocator's test nodes, built directly as :class:`Topology` values, and a random-topology strategy."""

from __future__ import annotations

from hypothesis import strategies as st

from kubegpu.gpu.model import PcieLink, Topology

SYS = PcieLink.CROSS_CPU
NODE = PcieLink.SAME_CPU
PHB = PcieLink.HOST_BRIDGE
PXB = PcieLink.MULTI_SWITCH
PIX = PcieLink.SINGLE_SWITCH
PSB = PcieLink.SAME_BOARD


def build(
    n: int,
    pcie: dict[tuple[int, int], PcieLink],
    nvlink: dict[tuple[int, int], int],
    *,
    default: PcieLink = SYS,
    numa: tuple[int | None, ...] | None = None,
    nvswitch: tuple[str | None, ...] | None = None,
    nvswitch_links: tuple[int, ...] | None = None,
) -> Topology:
    """A topology from pair tables (either order of a pair); unlisted PCIe pairs get ``default``."""
    links = [[None if i == j else default for j in range(n)] for i in range(n)]
    counts = [[0] * n for _ in range(n)]
    for (a, b), link in pcie.items():
        links[a][b] = links[b][a] = link
    for (a, b), count in nvlink.items():
        counts[a][b] = counts[b][a] = count
    return Topology(
        pcie=tuple(tuple(r) for r in links),
        nvlink=tuple(tuple(r) for r in counts),
        numa=numa if numa is not None else (None,) * n,
        nvswitch=nvswitch if nvswitch is not None else (None,) * n,
        nvswitch_links=nvswitch_links if nvswitch_links is not None else (0,) * n,
    )


def _halves(pairs: dict[tuple[int, int], PcieLink]) -> dict[tuple[int, int], PcieLink]:
    """The same PCIe layout on CPU 0 (GPUs 0-3) and CPU 1 (GPUs 4-7); cross-CPU pairs default to SYS."""
    return {**pairs, **{(a + 4, b + 4): link for (a, b), link in pairs.items()}}


# NewDGX1VoltaNode of go-gpuallocator's common_test.go.
DGX1_VOLTA = build(
    8,
    _halves({(0, 1): PIX, (0, 2): PHB, (0, 3): PHB, (1, 2): PHB, (1, 3): PHB, (2, 3): PIX}),
    {
        (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
        (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2,
    },
)  # fmt: skip

# NewDGX1PascalNode: every NVLink single, a different PCIe pairing.
DGX1_PASCAL = build(
    8,
    _halves({(0, 1): PHB, (0, 2): PIX, (0, 3): PHB, (1, 2): PHB, (1, 3): PIX, (2, 3): PHB}),
    {
        pair: 1
        for pair in [
            (0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 5), (2, 3),
            (2, 6), (3, 7), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7),
        ]
    },
)  # fmt: skip

# New4xRTX8000Node: bridged pairs 0-3 and 1-2. Upstream lists no PCIe link for the bridged pairs;
# a Topology needs one, so they get the same (cross-CPU) on both pairs, which keeps upstream's answers.
RTX8000 = build(4, {(0, 1): NODE, (2, 3): NODE}, {(0, 3): 2, (1, 2): 2})


@st.composite
def topologies(draw: st.DrawFn, max_gpus: int = 8) -> Topology:
    """Random topologies: any PCIe pairing, sparse NVLinks, NUMA nodes, up to two NVSwitch fabrics."""
    n = draw(st.integers(1, max_gpus))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    pcie = {p: draw(st.sampled_from(list(PcieLink))) for p in pairs}
    nvlink = {p: draw(st.sampled_from([0, 0, 0, 1, 2, 4])) for p in pairs}
    numa = tuple(draw(st.sampled_from([None, 0, 1])) for _ in range(n))
    fabric = tuple(draw(st.sampled_from([None, None, "fabric-a", "fabric-b"])) for _ in range(n))
    links = tuple(draw(st.sampled_from([6, 12, 18])) if f else 0 for f in fabric)
    return build(n, pcie, nvlink, numa=numa, nvswitch=fabric, nvswitch_links=links)


@st.composite
def requests(draw: st.DrawFn, n: int) -> tuple[list[int], list[int], int]:
    """A valid request on ``n`` GPUs: available (in random order), must-include ⊆ available, size."""
    available = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    size = draw(st.integers(1, len(available)))
    must = draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    return available, must, size
