"""Fractional GPUs on the node: ``--gpu-milli`` units, a share always from one GPU, the share told to the container."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.rm import milli, nodegpus, picks, preferred, resource_map, responses
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import plugin_config

MACHINE = profiles.load("dgx-a100")
UUID = [g.uuid for g in MACHINE.gpus]
BUILT = resource_map.build(MACHINE, plugin_config(["--gpu-milli", "0,1,5"]))
UNITS = BUILT["kubegpu.io/gpu-milli"]


def units(gpu: int, start: int = 0, stop: int = 1000) -> list[str]:
    return [f"{UUID[gpu]}::m{k}" for k in range(start, stop)]


def gpus_of(ids: list[str]) -> set[str]:
    return {i.partition("::")[0] for i in ids}


# --- what is advertised -------------------------------------------------------------------------------------------


def test_selected_gpus_leave_nvidia_com_gpu_and_become_1000_units_each() -> None:
    assert {r.name: len(r.devices) for r in BUILT} == {"kubegpu.io/gpu-milli": 3000, "nvidia.com/gpu": 5}
    assert gpus_of(list(UNITS.ids)) == {UUID[0], UUID[1], UUID[5]}
    assert not set(BUILT["nvidia.com/gpu"].ids) & {UUID[0], UUID[1], UUID[5]}
    assert UNITS.socket_name == "nvidia-gpu-milli.sock" and UNITS.is_milli
    unit = UNITS.by_id[f"{UUID[5]}::m999"]
    assert (unit.numa, unit.gpu_index, unit.milli) == (MACHINE.gpus[5].numa_node, 5, 999)


def test_all_and_uuids_select_too_and_off_is_the_default() -> None:
    everything = resource_map.build(MACHINE, plugin_config(["--gpu-milli", "all"]))
    assert {r.name: len(r.devices) for r in everything} == {"kubegpu.io/gpu-milli": 8000}
    by_uuid = resource_map.build(MACHINE, plugin_config(env={"GPU_MILLI": UUID[3]}))
    assert gpus_of(list(by_uuid["kubegpu.io/gpu-milli"].ids)) == {UUID[3]}
    assert resource_map.build(MACHINE, plugin_config()).names == ("nvidia.com/gpu",)


def test_the_config_file_key_selects_gpus_and_a_flag_wins_over_it() -> None:
    text = 'version: v1\nflags:\n  plugin:\n    gpuMilli: "2,3"\n'
    from_file = resource_map.build(MACHINE, plugin_config(text=text))["kubegpu.io/gpu-milli"]
    assert gpus_of(list(from_file.ids)) == {UUID[2], UUID[3]}
    flagged = resource_map.build(MACHINE, plugin_config(["--gpu-milli", "7"], text=text))["kubegpu.io/gpu-milli"]
    assert gpus_of(list(flagged.ids)) == {UUID[7]}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("half", "invalid --gpu-milli option: 'half': 'half' is neither a GPU index nor a GPU UUID"),
        (",", "invalid --gpu-milli option: ',': empty"),
    ],
)
def test_a_bad_gpu_milli_value_is_refused_naming_it(value: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        plugin_config(["--gpu-milli", value])


def test_a_gpu_that_is_not_there_fails_at_start_naming_it() -> None:
    with pytest.raises(resource_map.ResourceMapError, match="no whole GPU at index: 8"):
        resource_map.build(MACHINE, plugin_config(["--gpu-milli", "8"]))


def test_the_node_description_marks_milli_gpus_and_their_health() -> None:
    description = nodegpus.describe(MACHINE, BUILT.resources, {"kubegpu.io/gpu-milli": {f"{UUID[1]}::m7"}})
    gpus = description["gpus"]
    assert [g["milli"] for g in gpus] == ["kubegpu.io/gpu-milli" if i in (0, 1, 5) else None for i in range(8)]
    assert gpus[0]["id"] is None and gpus[2]["id"] == UUID[2]
    assert [g["health"] for g in gpus[:3]] == ["Healthy", "Unhealthy", "Healthy"]
    assert nodegpus.gpu_ids(description) is None  # some GPU is not advertised whole


# --- GetPreferredAllocation: all of a request from one GPU ---------------------------------------------------------


PICKS = [
    ("best_fit_takes_the_fullest_gpu_that_fits", units(0, 500) + units(1) + units(5, 700), [], 250, 5),
    ("too_little_on_the_fullest_goes_to_the_next", units(0, 500) + units(1) + units(5, 700), [], 400, 0),
    ("only_a_free_gpu_has_enough", units(0, 500) + units(1) + units(5, 700), [], 600, 1),
    ("lowest_index_on_ties", units(5) + units(1), [], 500, 1),
    ("must_include_fixes_the_gpu", units(0) + units(1, 900), units(1, 950, 960), 50, 1),
]


@pytest.mark.parametrize(("available", "must", "size", "gpu"), [r[1:] for r in PICKS], ids=[r[0] for r in PICKS])
def test_a_share_comes_from_one_gpu_best_fit(available: list[str], must: list[str], size: int, gpu: int) -> None:
    answer = preferred.Preferred(UNITS, MACHINE.topology, "distributed")(available + must, must, size)
    assert len(answer) == size and len(set(answer)) == size
    assert gpus_of(answer) == {UUID[gpu]} and set(must) <= set(answer) and set(answer) <= set(available + must)


REFUSALS = [
    ("no_single_gpu_has_enough", units(0, 500) + units(1, 500), [], 600, "no single GPU has 600 units available"),
    ("must_include_on_two_gpus", units(0) + units(1), [units(0)[0], units(1)[0]], 10, "lie on 2 GPUs"),
    ("more_than_a_gpu", units(0) + units(1), [], 1001, "more than one GPU"),
]


@pytest.mark.parametrize(
    ("available", "must", "size", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_share_that_no_one_gpu_can_give_is_refused(
    available: list[str], must: list[str], size: int, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        preferred.Preferred(UNITS, MACHINE.topology, "distributed")(available, must, size)


# --- Allocate: one GPU, and the share in the container's env ----------------------------------------------------


def allocate(ids: list[str], **options: Any) -> dict[str, str]:
    opts = responses.ResponseOptions(**options)
    (edits,) = responses.allocate_all(UNITS, [ids], opts, exists=lambda _: True)
    return edits.envs


def test_allocate_tells_the_container_its_share_of_its_one_gpu() -> None:
    env = allocate(units(5, 0, 250))
    assert env["NVIDIA_VISIBLE_DEVICES"] == UUID[5]
    memory = MACHINE.gpus[5].memory_mib // 4
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": UUID[5],
        "KUBEGPU_GPU_MILLI": "250",
        "CUDA_DEVICE_MEMORY_LIMIT": f"{memory}m",
        "CUDA_DEVICE_SM_LIMIT": "25",
    }


def test_with_mps_the_share_is_also_the_mps_client_limits() -> None:
    env = allocate(units(0, 0, 500), mps=True)
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={MACHINE.gpus[0].memory_mib // 2}M"


def test_allocate_refuses_units_spread_over_two_gpus() -> None:
    with pytest.raises(InvalidRequest, match=r'"kubegpu.io/gpu-milli": invalid request: units spread over 2 GPUs'):
        allocate(units(0, 0, 300) + units(1, 0, 300))


def test_an_empty_request_is_valid_and_gets_no_share() -> None:
    env = allocate([])
    assert env["NVIDIA_VISIBLE_DEVICES"] == "" and "KUBEGPU_GPU_MILLI" not in env


def test_the_share_env_names_units_once_even_if_repeated() -> None:
    ids = units(1, 0, 100)
    assert milli.share_env(UNITS, ids + ids, mps=False)["KUBEGPU_GPU_MILLI"] == "100"


# --- the scheduler's pick: the annotated GPU's units ------------------------------------------------------------


def milli_pod(name: str, share: int, gpu: int | None, created: str = "2026-01-01T00:00:00Z") -> picks.PodPick:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created}
    if gpu is not None:
        meta["annotations"] = {picks.DEVICES_ANNOTATION: UUID[gpu], "kubegpu.io/gpu-milli": str(share)}
    spec = {"containers": [{"name": "c", "resources": {"limits": {"kubegpu.io/gpu-milli": str(share)}}}]}
    return picks.pod_pick({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


def test_a_placed_fractional_pod_gets_units_of_the_gpu_the_scheduler_chose() -> None:
    # Best fit alone would take GPU 0 (500 left); the scheduler chose GPU 5.
    available = units(0, 500) + units(1) + units(5)
    decision = picks.choose([milli_pod("a", 500, 5)], UNITS, available, [], 500)
    assert decision.devices is not None and gpus_of(decision.devices) == {UUID[5]} and len(decision.devices) == 500


def test_a_placed_fractional_pod_whose_gpu_is_short_fails_admission_never_another_gpu() -> None:
    with pytest.raises(picks.PickUnavailable, match=r"chose GPU GPU-\S+ for 600 .* it has 500 units available"):
        picks.choose([milli_pod("a", 600, 0)], UNITS, units(0, 500) + units(1), [], 600)


def test_an_unplaced_fractional_pod_is_left_to_the_policy() -> None:
    decision = picks.choose([milli_pod("a", 600, None)], UNITS, units(0) + units(1), [], 600)
    assert decision.devices is None


def test_a_fractional_pod_counts_as_given_once_its_whole_share_is() -> None:
    pod = milli_pod("a", 300, 1)
    assert not picks.fully_given(pod, UNITS, set(units(1, 0, 299)))
    assert picks.fully_given(pod, UNITS, set(units(1, 0, 300)))


@settings(max_examples=150, deadline=None)
@given(
    left=st.lists(st.integers(min_value=0, max_value=1000), min_size=3, max_size=3),
    size=st.integers(min_value=1, max_value=1000),
)
def test_any_answer_is_one_gpus_units_best_fit_or_a_refusal(left: list[int], size: int) -> None:
    gpus = (0, 1, 5)
    available = [u for g, n in zip(gpus, left, strict=True) for u in units(g, 1000 - n)]
    try:
        answer = milli.pick(UNITS, available, [], size)
    except milli.ShareError:
        assert max(left) < size  # refused only when no one GPU has enough
        return
    (gpu,) = gpus_of(answer)
    assert len(set(answer)) == size and set(answer) <= set(available)
    mine = left[gpus.index(UUID.index(gpu))]
    assert mine >= size and all(n < size or n >= mine for n in left)  # no fuller GPU that fits was passed over
