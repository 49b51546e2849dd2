"""GetPreferredAllocation's mapping: device IDs to placement's GPU indices and groups, and back."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu import placement
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.rm import preferred, resource_map
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine
from tests.deviceplugin.fixtures.build import plugin_config

PROFILES = ["dgx-a100", "dgx1-v100", "pcie-4xt4", "hgx-h200", "a100-mig"]
MACHINES: dict[str, Machine] = {name: profiles.load(name) for name in PROFILES}
GPU_RESOURCES = {name: resource_map.build(m, plugin_config()).resources[0] for name, m in MACHINES.items()}
ALL = list(range(8))


def pick(profile: str, available: list[int], must: list[int], size: int, policy: str = "topology") -> list[int]:
    """Run the adapter with GPU indices instead of UUIDs."""
    machine = MACHINES[profile]
    uuid = [g.uuid for g in machine.gpus]
    result = preferred.preferred(
        GPU_RESOURCES[profile], machine.topology, policy, [uuid[i] for i in available], [uuid[i] for i in must], size
    )
    return [uuid.index(u) for u in result]


def test_best_effort_gives_go_gpuallocators_answers_on_dgx1_volta() -> None:
    # Reference section f's worked example: the whole-node partition objective, not the best single pair.
    assert pick("dgx1-v100", ALL, [], 2, "best-effort") == [0, 3]
    assert pick("dgx1-v100", [1, 2, 4, 5, 6, 7], [], 2, "best-effort") == [1, 2]


def test_topology_gives_four_gpus_of_one_numa_node_on_a_free_dgx_a100() -> None:
    chosen = pick("dgx-a100", ALL, [], 4)
    assert len({MACHINES["dgx-a100"].gpus[i].numa_node for i in chosen}) == 1


@pytest.mark.parametrize("policy", ["topology", "best-effort"])
@pytest.mark.parametrize(
    ("profile", "available", "must", "size"),
    [("dgx-a100", ALL, [5], 2), ("dgx1-v100", [0, 2, 3, 5, 6], [6], 3), ("pcie-4xt4", [0, 2, 3], [0], 2)],
    ids=["a100-must-5", "v100-must-6-of-5", "t4-must-0"],
)
def test_whole_gpus_are_what_placement_picks_mapped_to_uuids_in_index_order(
    profile: str, available: list[int], must: list[int], size: int, policy: str
) -> None:
    machine = MACHINES[profile]
    expected = placement.pick(policy, machine.topology, available, must, size)
    assert pick(profile, available, must, size, policy) == expected


def shared(
    text: str, profile: str = "dgx-a100", name: str = "nvidia.com/gpu", argv: list[str] | None = None
) -> Resource:
    return resource_map.build(MACHINES[profile], plugin_config(argv or [], text=text))[name]


REPLICAS_2X4 = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4, devices: [0, 1]}]}}"


def per_gpu(resource: Resource, ids: list[str]) -> list[int]:
    counts = Counter(resource.by_id[i].gpu_index for i in ids)
    return sorted(counts.values(), reverse=True)


@pytest.mark.parametrize(
    ("policy", "size", "spread"),
    [("distributed", 4, [2, 2]), ("packed", 4, [4]), ("packed", 5, [4, 1]), ("distributed", 3, [2, 1])],
    ids=["distributed-spreads", "packed-fills-one-gpu", "packed-overflows", "distributed-odd"],
)
def test_replicas_are_grouped_by_their_gpu_as_nvidia_counts_them(policy: str, size: int, spread: list[int]) -> None:
    resource = shared(REPLICAS_2X4)
    replicas = [d.id for d in resource.devices if d.replica is not None]
    machine = MACHINES["dgx-a100"]
    got = preferred.preferred(resource, machine.topology, policy, replicas, [], size)
    assert len(got) == size and set(got) <= set(replicas)
    assert per_gpu(resource, got) == spread


def test_a_resource_mixing_whole_gpus_and_replicas_is_placed_as_shared() -> None:
    resource = shared(REPLICAS_2X4)
    assert not preferred.places_whole_gpus(resource)
    assert preferred.places_whole_gpus(GPU_RESOURCES["dgx-a100"])


def test_mig_devices_are_spread_over_their_parent_gpus() -> None:
    resource = resource_map.build(MACHINES["a100-mig"], plugin_config(["--mig-strategy", "mixed"]))[
        "nvidia.com/mig-1g.10gb"
    ]
    ids = [d.id for d in resource.devices]
    gpus = {resource.by_id[i].gpu_index for i in ids}
    got = preferred.preferred(resource, MACHINES["a100-mig"].topology, "distributed", ids, [], len(gpus))
    # NVIDIA groups MIG devices by their own UUID, so it cannot spread them; grouped by parent they spread.
    assert {resource.by_id[i].gpu_index for i in got} == gpus


def test_must_include_comes_first_for_shared_devices() -> None:
    resource = shared(REPLICAS_2X4)
    replicas = [d.id for d in resource.devices if d.replica is not None]
    got = preferred.preferred(resource, MACHINES["dgx-a100"].topology, "distributed", replicas, [replicas[5]], 3)
    assert got[0] == replicas[5] and len(set(got)) == 3


IMPOSSIBLE = [
    ("size-zero", ALL, [], 0, "size must be a positive number"),
    ("more-than-available", [0, 1], [], 3, "cannot pick 3 GPUs from 2 available"),
    ("must-include-not-available", [0, 1], [2], 2, "must-include device GPU-"),
    ("more-must-than-size", [0, 1, 2], [0, 1], 1, "must-include lists 2 GPUs but the request is for 1"),
]


@pytest.mark.parametrize(
    ("available", "must", "size", "message"), [r[1:] for r in IMPOSSIBLE], ids=[r[0] for r in IMPOSSIBLE]
)
def test_impossible_requests_are_invalid_naming_the_problem_never_short(
    available: list[int], must: list[int], size: int, message: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        pick("dgx-a100", available, must, size)
    text = str(caught.value)
    assert text.startswith('invalid preferred allocation request for "nvidia.com/gpu": ')
    assert message in text


@pytest.mark.parametrize("where", ["available", "must-include"])
def test_unknown_ids_are_invalid_naming_the_id(where: str) -> None:
    machine = MACHINES["dgx-a100"]
    u = [g.uuid for g in machine.gpus]
    available = [u[0], "GPU-nope"] if where == "available" else [u[0], u[1]]
    must = ["GPU-nope"] if where == "must-include" else []
    with pytest.raises(InvalidRequest, match=f"unknown {where} device: GPU-nope"):
        preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, "topology", available, must, 1)


def test_duplicates_in_the_request_count_once() -> None:
    machine = MACHINES["dgx-a100"]
    u = [g.uuid for g in machine.gpus]
    got = preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, "topology", [u[0], u[0], u[1]], [u[1]], 2)
    assert sorted(got) == sorted([u[0], u[1]])
    with pytest.raises(InvalidRequest, match="from 2 available"):
        preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, "topology", [u[0], u[0], u[1]], [], 3)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, list[int], list[int], int]:
    profile = draw(st.sampled_from(PROFILES))
    count = len(MACHINES[profile].gpus)
    available = draw(st.lists(st.integers(0, count - 1), min_size=1, unique=True))
    must = draw(st.lists(st.sampled_from(available), unique=True))
    size = draw(st.integers(max(1, len(must)), len(available)))
    return profile, available, must, size


@given(requests(), st.sampled_from(["topology", "best-effort"]), st.randoms(use_true_random=False))
def test_answer_includes_must_stays_in_available_has_exact_size_and_ignores_order(
    request: tuple[str, list[int], list[int], int], policy: str, rnd: random.Random
) -> None:
    profile, available, must, size = request
    result = pick(profile, available, must, size, policy)
    assert len(result) == size == len(set(result))
    assert set(must) <= set(result) <= set(available)
    shuffled_available, shuffled_must = available[:], must[:]
    rnd.shuffle(shuffled_available)
    rnd.shuffle(shuffled_must)
    assert pick(profile, shuffled_available + shuffled_available[:2], shuffled_must, size, policy) == result


@given(requests(), st.integers(1, 4))
def test_asking_more_than_available_is_always_invalid(
    request: tuple[str, list[int], list[int], int], extra: int
) -> None:
    profile, available, must, _ = request
    with pytest.raises(InvalidRequest):
        pick(profile, available, must, len(available) + extra)


@given(
    st.lists(st.integers(0, 31), min_size=1, max_size=32, unique=True),
    st.sampled_from(["distributed", "packed"]),
    st.data(),
)
def test_shared_answers_hold_must_include_stay_available_and_have_the_size(
    indices: list[int], policy: str, data: st.DataObject
) -> None:
    resource = shared("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}")
    ids = [resource.devices[i].id for i in indices]
    must = data.draw(st.lists(st.sampled_from(ids), unique=True))
    size = data.draw(st.integers(max(1, len(must)), len(ids)))
    got = preferred.preferred(resource, MACHINES["dgx-a100"].topology, policy, ids, must, size)
    assert len(got) == size == len(set(got))
    assert got[: len(must)] == must and set(got) <= set(ids)


def test_a_repeated_whole_gpu_request_gets_the_answer_a_fresh_adapter_gives() -> None:
    machine = MACHINES["dgx1-v100"]
    uuid = [g.uuid for g in machine.gpus]
    kept = preferred.Preferred(GPU_RESOURCES["dgx1-v100"], machine.topology, "best-effort")
    rng = random.Random(7)
    requests = [(rng.sample(uuid, rng.randint(2, 8)), rng.randint(1, 2)) for _ in range(60)]
    for available, size in requests + requests:
        fresh = preferred.Preferred(GPU_RESOURCES["dgx1-v100"], machine.topology, "best-effort")
        answer = kept(available, [], size)
        assert answer == fresh(available, [], size)
        answer.append("changed by the caller")  # the kept answer is not the list handed out


def test_kept_answers_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preferred, "ANSWERS_KEPT", 4)
    machine = MACHINES["dgx-a100"]
    uuid = [g.uuid for g in machine.gpus]
    adapter = preferred.Preferred(GPU_RESOURCES["dgx-a100"], machine.topology, "topology")
    for n in range(2, 9):
        adapter(uuid[:n], [], 1)
        assert len(adapter._answers) <= 4


def test_a_refused_request_is_refused_again_not_kept() -> None:
    machine = MACHINES["dgx-a100"]
    uuid = [g.uuid for g in machine.gpus]
    adapter = preferred.Preferred(GPU_RESOURCES["dgx-a100"], machine.topology, "topology")
    for _ in range(2):
        with pytest.raises(InvalidRequest):
            adapter(uuid[:2], [], 3)
