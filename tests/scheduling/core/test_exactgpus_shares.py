"""A fractional pod's one GPU on a node that publishes its GPUs: best fit among the GPUs published for shares."""

from __future__ import annotations

import pytest

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from kubegpu.scheduling.core import exactgpus
from kubegpu.scheduling.core.errors import InvalidSpec
from tests.deviceplugin.fixtures.build import plugin_config

MACHINE = profiles.load("dgx-a100")


def published(select: str = "0,1,5", sick: frozenset[int] = frozenset()) -> exactgpus.NodeGpus:
    served = resource_map.build(MACHINE, plugin_config(["--gpu-milli", select])).resources
    bad = {"kubegpu.io/gpu-milli": {f"{MACHINE.gpus[i].uuid}::m0" for i in sick}}
    text = nodegpus.node_annotations(nodegpus.describe(MACHINE, served, bad))[nodegpus.GPUS_ANNOTATION]
    assert text is not None
    return exactgpus.read("n", text)


def test_the_reader_knows_which_gpus_are_for_shares_and_their_uuids() -> None:
    node = published()
    assert node.milli == tuple(i in (0, 1, 5) for i in range(8))
    assert node.uuids == tuple(g.uuid for g in MACHINE.gpus)
    assert node.free(()) == [2, 3, 4, 6, 7]  # never chosen whole


CHOICES = [
    ("a_free_node_gives_the_lowest_index", {}, 500, 0),
    ("best_fit_shares_the_half_used_gpu", {1: 500}, 500, 1),
    ("best_fit_prefers_the_fuller_of_two", {0: 200, 5: 600}, 300, 5),
    ("a_share_too_big_for_the_half_used_goes_elsewhere", {0: 500}, 600, 1),
]


@pytest.mark.parametrize(("used", "share", "gpu"), [r[1:] for r in CHOICES], ids=[r[0] for r in CHOICES])
def test_best_fit_as_the_simulators_picker(used: dict[int, int], share: int, gpu: int) -> None:
    choice = exactgpus.choose_share(published(), used, share)
    assert choice is not None and choice.indices == (gpu,) and choice.devices == (MACHINE.gpus[gpu].uuid,)


def test_an_unhealthy_or_full_gpu_is_never_chosen() -> None:
    node = published(sick=frozenset({0}))
    choice = exactgpus.choose_share(node, {1: 1000}, 1)
    assert choice is not None and choice.indices == (5,)
    assert exactgpus.choose_share(node, {1: 1000, 5: 1}, 1000) is None


@pytest.mark.parametrize("share", [0, 1001])
def test_an_impossible_share_is_an_error(share: int) -> None:
    with pytest.raises(InvalidSpec, match=r"a share must be within 1\.\.1000"):
        exactgpus.choose_share(published(), {}, share)
