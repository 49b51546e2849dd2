"""Which pending pod the kubelet admits and which devices it gets: the scheduler's, or a refusal, never others."""

from __future__ import annotations

from typing import Any

import pytest

from kubegpu.deviceplugin.rm import picks, resource_map
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import plugin_config

MACHINE = profiles.load("dgx-a100")
GPU = resource_map.build(MACHINE, plugin_config()).resources[0]
ID = [g.uuid for g in MACHINE.gpus]
ALL = list(ID)


def pod(
    name: str,
    gpus: int,
    chosen: list[int] | None = None,
    *,
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Pending",
    deleting: bool = False,
    containers: list[int] | None = None,
) -> picks.PodPick:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created}
    if chosen is not None:
        meta["annotations"] = {picks.DEVICES_ANNOTATION: ",".join(ID[i] for i in chosen)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    sizes = containers or [gpus]
    spec = {
        "containers": [
            {"name": f"c{n}", "resources": {"limits": {"nvidia.com/gpu": str(k)}}} for n, k in enumerate(sizes)
        ]
    }
    return picks.pod_pick({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def choose(pods: list[picks.PodPick], available: list[str], size: int, must: list[str] | None = None, **kw: Any):
    return picks.choose(pods, GPU, available, must or [], size, **kw)


def indices(ids: list[str] | None) -> list[int] | None:
    return None if ids is None else [ID.index(i) for i in ids]


def test_the_annotated_devices_are_the_answer_in_annotation_order() -> None:
    decision = choose([pod("a", 4, [6, 1, 7, 0])], ALL, 4)
    assert decision.pod is not None and decision.pod.name == "a"
    assert indices(decision.devices) == [6, 1, 7, 0]


def test_of_two_pods_back_to_back_each_gets_its_own_pick() -> None:
    a = pod("a", 2, [0, 1], created="2026-01-01T00:00:00Z")
    b = pod("b", 2, [4, 5], created="2026-01-01T00:00:01Z")
    assert indices(choose([b, a], ALL, 2).devices) == [0, 1]  # the oldest first, as the kubelet admits
    after_a = [i for i in ALL if i not in (ID[0], ID[1])]
    assert indices(choose([a, b], after_a, 2, allocated=frozenset({"uid-a"})).devices) == [4, 5]
    # Even without knowing a was allocated, a's devices are gone, so b's pick is the one that fits.
    assert indices(choose([a, b], after_a, 2).devices) == [4, 5]


def test_a_pick_whose_device_is_taken_fails_admission_naming_the_device() -> None:
    available = [i for i in ALL if i != ID[3]]
    with pytest.raises(picks.PickUnavailable) as err:
        choose([pod("a", 2, [2, 3])], available, 2)
    assert f"pod ns/a: the scheduler chose nvidia.com/gpu devices {ID[2]},{ID[3]}" in str(err.value)
    assert f"not available (in use or unhealthy): {ID[3]}" in str(err.value)


def test_pods_without_the_annotation_are_left_to_the_policy() -> None:
    decision = choose([pod("plain", 2)], ALL, 2)
    assert decision.devices is None and decision.pod is not None and decision.pod.name == "plain"
    assert choose([], ALL, 2) == picks.Decision(None, None)


def test_an_older_unannotated_pod_does_not_steal_a_fitting_pick_and_is_left_to_the_policy() -> None:
    plain = pod("plain", 2, created="2026-01-01T00:00:00Z")
    placed = pod("placed", 2, [4, 5], created="2026-01-01T00:00:05Z")
    assert indices(choose([plain, placed], ALL, 2).devices) == [4, 5]  # a fitting pick wins over age


@pytest.mark.parametrize(
    ("what", "other"),
    [
        ("terminating", {"deleting": True}),
        ("running", {"phase": "Running"}),
        ("another size", {"gpus": 3}),
    ],
)
def test_pods_that_are_not_being_admitted_are_no_candidates(what: str, other: dict[str, Any]) -> None:
    gpus = other.pop("gpus", 2)
    gone = pod("gone", gpus, [2, 3], created="2026-01-01T00:00:00Z", **other)
    assert choose([gone], [i for i in ALL if i != ID[3]], 2) == picks.Decision(None, None), what


def test_a_deleted_predecessor_holding_the_successors_gpus_fails_the_successor_with_a_reason() -> None:
    old = pod("old", 2, [0, 1], deleting=True)
    new = pod("new", 2, [0, 1], created="2026-01-01T00:00:09Z")
    with pytest.raises(picks.PickUnavailable, match="pod ns/new"):
        choose([old, new], ALL[2:], 2)


def test_a_pod_allocated_before_a_plugin_restart_counts_last() -> None:
    # After a restart the plugin forgets what it allocated; a's devices are all in use, so a is not the one
    # being admitted: the unannotated b is, and the policy decides for it.
    a = pod("a", 2, [0, 1], created="2026-01-01T00:00:00Z")
    b = pod("b", 2, created="2026-01-01T00:00:01Z")
    decision = choose([a, b], ALL[2:], 2)
    assert decision.devices is None and decision.pod is not None and decision.pod.name == "b"


def test_multi_container_pods_get_the_pick_container_by_container() -> None:
    both = pod("two", 2, [0, 1, 2, 3], containers=[2, 2])
    assert indices(choose([both], ALL, 2).devices) == [0, 1]
    assert indices(choose([both], ALL[2:], 2).devices) == [2, 3]


def test_must_include_ids_come_first_and_must_be_in_the_pick() -> None:
    app = pod("app", 3, [0, 1, 2], containers=[3])
    assert indices(choose([app], ALL, 3, must=[ID[1]]).devices) == [1, 0, 2]
    with pytest.raises(picks.PickUnavailable):
        choose([app], ALL, 3, must=[ID[5]])


def test_annotated_devices_of_another_resource_do_not_count() -> None:
    other = pod("mig", 1)
    other = picks.PodPick(**{**other.__dict__, "devices": ("MIG-abc",)})
    assert choose([other], ALL, 1).devices is None


def test_pod_pick_reads_requests_limits_init_containers_and_phase() -> None:
    parsed = picks.pod_pick(
        {
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "annotations": {"kubegpu.io/gpu-devices": "a, b"}},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": 1}}}],
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "500m"}}}],
            },
        }
    )
    assert parsed.devices == ("a", "b")
    assert parsed.asks == frozenset({("nvidia.com/gpu", 1), ("nvidia.com/gpu", 2)})
    assert parsed.pending
