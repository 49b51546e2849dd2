"""Exact GPUs from a node's published description: the policy's pick among free healthy GPUs, and its score."""

from __future__ import annotations

import json

import pytest

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from kubegpu.scheduling.core import exactgpus
from tests.deviceplugin.fixtures.build import plugin_config


def published(profile: str, unhealthy: frozenset[int] | set[int] = frozenset()) -> exactgpus.NodeGpus:
    """What the plugin writes for ``profile``, read back as the scheduler reads it."""
    machine = profiles.load(profile)
    served = resource_map.build(machine, plugin_config()).resources
    bad = {"nvidia.com/gpu": {machine.gpus[i].uuid for i in unhealthy}}
    text = nodegpus.node_annotations(nodegpus.describe(machine, served, bad))[nodegpus.GPUS_ANNOTATION]
    assert text is not None
    return exactgpus.read(profile, text)


def uuids(profile: str, indices: list[int]) -> set[str]:
    machine = profiles.load(profile)
    return {machine.gpus[i].uuid for i in indices}


def numa_of(profile: str, indices: tuple[int, ...]) -> set[int | None]:
    return {profiles.load(profile).gpus[i].numa_node for i in indices}


def test_a_four_gpu_pod_on_a_free_dgx_a100_gets_four_gpus_of_one_numa_node() -> None:
    choice = exactgpus.choose(published("dgx-a100"), set(), 4)
    assert choice is not None and len(choice.indices) == 4
    assert len(numa_of("dgx-a100", choice.indices)) == 1
    assert set(choice.devices) == uuids("dgx-a100", list(choice.indices))
    assert choice.annotation == ",".join(choice.devices)
    assert choice.interconnect == 100


def test_a_two_gpu_pod_on_dgx1_v100_gets_an_nvlink_pair() -> None:
    node = published("dgx1-v100")
    choice = exactgpus.choose(node, set(), 2)
    assert choice is not None
    a, b = choice.indices
    assert node.topology.nvlink[a][b] > 0


@pytest.mark.parametrize(
    ("case", "in_use", "unhealthy", "count", "expected_free"),
    [
        ("in use", [0, 1, 2], set(), 4, 5),
        ("unhealthy", [], {3, 5}, 2, 6),
        ("both", [0], {7}, 6, 6),
    ],
)
def test_gpus_in_use_or_unhealthy_are_never_chosen(
    case: str, in_use: list[int], unhealthy: set[int], count: int, expected_free: int
) -> None:
    node = published("dgx-a100", unhealthy)
    taken = uuids("dgx-a100", in_use)
    assert len(node.free(taken)) == expected_free, case
    choice = exactgpus.choose(node, taken, count)
    assert choice is not None
    assert not set(choice.indices) & (set(in_use) | unhealthy), case


def test_a_pod_that_does_not_fit_gets_none() -> None:
    node = published("pcie-4xt4", {0})
    assert exactgpus.choose(node, uuids("pcie-4xt4", [1]), 3) is None


def test_well_connected_free_gpus_score_higher_than_scattered_ones() -> None:
    node = published("dgx1-v100")
    # Free GPUs 0-3 (one fully NVLinked quad of the hybrid cube mesh) against 0,2,5,7 (scattered).
    grouped = exactgpus.choose(node, uuids("dgx1-v100", [4, 5, 6, 7]), 4)
    scattered = exactgpus.choose(node, uuids("dgx1-v100", [1, 3, 4, 6]), 4)
    assert grouped is not None and scattered is not None
    assert grouped.interconnect == 100
    assert scattered.interconnect < grouped.interconnect


def test_one_gpu_always_scores_the_maximum() -> None:
    assert exactgpus.interconnect(published("pcie-4xt4"), [2]) == exactgpus.MAX_SCORE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"version": "v2"}', "version 'v2' is not 'v1'"),
        ('{"version": "v1", "topology": {"gpus": 1, "pcie": [[null]], "nvlink": [[0]]}, "gpus": []}', "must list 1"),
        ('{"version": "v1", "topology": {"gpus": 0}}', "gpus: must be at least 1"),
    ],
)
def test_an_unreadable_description_names_the_node_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(exactgpus.DescriptionError) as err:
        exactgpus.read("n1", text)
    assert "node n1: annotation kubegpu.io/gpus" in str(err.value)
    assert message in str(err.value)


def test_the_reader_takes_every_gpu_even_in_a_shuffled_list() -> None:
    machine = profiles.load("pcie-4xt4")
    served = resource_map.build(machine, plugin_config()).resources
    described = nodegpus.describe(machine, served, {})
    described["gpus"].reverse()
    node = exactgpus.read("n", json.dumps(described))
    assert node.ids == tuple(g.uuid for g in machine.gpus)
