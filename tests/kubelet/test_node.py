"""Pod admission against a stub plugin over real gRPC: Allocate, preferred allocation, reuse, PreStart, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet import errors, pod
from kubegpu.kubelet.daemon import Daemon
from kubegpu.kubelet.pod import Pod
from tests.kubelet.conftest import EmulatorFactory, StubFactory, capacity
from tests.kubelet.stubplugin import StubPlugin, devices
from tests.polling import eventually

R = "example.com/gpu"


def make_pod(
    name: str, *containers: tuple[str, int], init: tuple[tuple[str, int, bool], ...] = (), uid: str = ""
) -> Pod:
    def c(n: str, k: int, **extra: Any) -> dict[str, Any]:
        return {"name": n, "resources": {"limits": {R: k}}, **extra}

    spec: dict[str, Any] = {"containers": [c(n, k) for n, k in containers]}
    if init:
        spec["initContainers"] = [c(n, k, **({"restartPolicy": "Always"} if side else {})) for n, k, side in init]
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    return pod.parse({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


async def ready(emulator: Daemon, start_stub: StubFactory, n: int = 4, **kw: Any) -> StubPlugin:
    stub = await start_stub(devs=devices(n), **kw)
    await eventually(lambda: capacity(emulator) == (n, n))
    return stub


def held(emulator: Daemon) -> dict[str, list[str]]:
    return {r: v["allocated"] for r, v in emulator.node.manager.resource_status().items()}  # type: ignore[misc]


def checkpoint_entries(emulator: Daemon) -> list[dict[str, Any]]:
    return json.loads(emulator.node.manager.checkpoint_file.read_bytes())["Data"]["PodDeviceEntries"] or []


async def test_a_pod_gets_the_plugins_answer_as_runtime_options(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub)
    result = await emulator.node.admit(make_pod("p", ("main", 2)))
    main = result["containers"]["main"]  # type: ignore[index]
    assert main["resources"] == {R: ["dev-0", "dev-1"]}
    assert main["envs"] == {"STUB_VISIBLE_DEVICES": "dev-0,dev-1"}
    assert main["cdi_devices"] == ["example.com/stub=dev-0", "example.com/stub=dev-1"]
    assert [d["host_path"] for d in main["devices"]] == ["/dev/dev-0", "/dev/dev-1"]
    assert main["mounts"][0]["read_only"] is True
    assert main["annotations"] == {"stub.example.com/devices": "dev-0,dev-1"}
    # One Allocate per (container, resource) carrying all K IDs.
    assert stub.calls.allocate == [["dev-0", "dev-1"]]
    assert result["allocate_rpcs"] == 1
    assert [e["ContainerName"] for e in checkpoint_entries(emulator)] == ["main"]
    # Allocation does not reduce allocatable.
    assert capacity(emulator) == (4, 4)


async def test_nine_on_eight_is_rejected_with_the_kubelets_error_and_changes_nothing(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, n=8)
    before = emulator.node.status()
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("big", ("main", 9)))
    assert exc.value.reason == "UnexpectedAdmissionError"
    assert exc.value.message == (
        "Allocate failed due to requested number of devices unavailable for example.com/gpu. "
        "Requested: 9, Available: 8, which is unexpected"
    )
    assert stub.calls.allocate == []
    after = emulator.node.status()
    assert after["pods"] == before["pods"] == []
    assert after["resources"] == before["resources"]


async def test_a_rejected_pod_gives_back_what_its_earlier_containers_got(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub)
    with pytest.raises(errors.ControlError, match="Requested: 3, Available: 2"):
        await emulator.node.admit(make_pod("p", ("a", 2), ("b", 3)))
    assert stub.calls.allocate == [["dev-0", "dev-1"]]
    assert held(emulator) == {R: []}
    assert checkpoint_entries(emulator) == []
    # The devices really are free again.
    await emulator.node.admit(make_pod("q", ("a", 4)))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda s: setattr(s, "fail_allocate", (grpc.StatusCode.INVALID_ARGUMENT, "unknown device dev-0")),
            "Allocate failed due to rpc error: code = InvalidArgument desc = unknown device dev-0, which is unexpected",
        ),
        (
            lambda s: setattr(s, "respond", lambda ids: api_pb2.AllocateResponse()),
            "Allocate failed due to no containers return in allocation response "
            "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}, which is unexpected",
        ),
    ],
    ids=["allocate-rpc-error", "zero-container-responses"],
)
async def test_a_failing_allocate_rejects_the_pod(
    emulator: Daemon, start_stub: StubFactory, setup: Any, message: str
) -> None:
    stub = await ready(emulator, start_stub)
    setup(stub)
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("p", ("main", 1)))
    assert exc.value.message == message
    assert held(emulator) == {R: []}
    assert emulator.node.status()["pods"] == []


async def test_resources_no_plugin_serves_are_left_to_the_scheduler(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub)
    p = pod.parse(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"other.io/thing": 3}}}]},
        }
    )
    result = await emulator.node.admit(p)
    assert result["containers"]["c"]["resources"] == {}  # type: ignore[index]
    assert stub.calls.allocate == []


async def test_verified_preferred_allocation_arguments_for_init_two_then_app_three(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, preferred_available=True)
    await emulator.node.admit(make_pod("p", ("app", 3), init=(("init", 2, False),)))
    (a1, m1, s1), (a2, m2, s2) = stub.calls.preferred
    assert (a1, m1, s1) == (["dev-0", "dev-1", "dev-2", "dev-3"], [], 2)
    init_devices = stub.calls.allocate[0]
    assert sorted(a2) == ["dev-0", "dev-1", "dev-2", "dev-3"]
    assert sorted(m2) == sorted(init_devices)
    assert s2 == 3
    # The app's single Allocate holds all 3 IDs, the 2 reused ones included.
    assert len(stub.calls.allocate[1]) == 3 and set(init_devices) <= set(stub.calls.allocate[1])


async def test_the_plugins_preference_is_followed(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub, preferred_available=True)
    stub.prefer = lambda avail, must, size: list(reversed(avail))[:size]
    result = await emulator.node.admit(make_pod("p", ("c", 2)))
    assert result["containers"]["c"]["resources"] == {R: ["dev-3", "dev-2"]}  # type: ignore[index]


async def test_without_opt_in_get_preferred_allocation_is_never_called(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, preferred_available=False)
    await emulator.node.admit(make_pod("p", ("c", 2)))
    assert stub.calls.preferred == []


async def test_a_failing_get_preferred_allocation_rejects_the_pod(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub, preferred_available=True)
    stub.fail_preferred = (grpc.StatusCode.INTERNAL, "policy crashed")
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("p", ("c", 2)))
    assert exc.value.message == (
        "Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: "
        "rpc error: code = Internal desc = policy crashed, which is unexpected"
    )
    assert stub.calls.allocate == []


async def test_init_devices_are_reused_but_a_sidecar_keeps_its_own(emulator: Daemon, start_stub: StubFactory) -> None:
    # kubelet-device-manager.md §7 [verified]: init=2, sidecar=1 from them, app=2 never gets the sidecar's.
    await ready(emulator, start_stub)
    result = await emulator.node.admit(make_pod("p", ("app", 2), init=(("init", 2, False), ("side", 1, True))))
    got = {n: c["resources"][R] for n, c in result["containers"].items()}  # type: ignore[attr-defined]
    assert got["side"][0] in got["init"]
    assert got["side"][0] not in got["app"]
    rest_of_init = [d for d in got["init"] if d not in got["side"]]
    assert set(rest_of_init) < set(got["app"])
    assert len(set(got["app"]) - set(got["init"])) == 1


async def test_containers_without_devices_need_no_rpc(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub)
    await emulator.node.admit(make_pod("p", ("c", 0)))
    assert stub.calls.allocate == []


async def test_pre_start_container_is_called_with_each_containers_devices_when_required(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, pre_start_required=True)
    await emulator.node.admit(make_pod("p", ("a", 1), ("b", 2)))
    assert stub.calls.pre_start == [["dev-0"], ["dev-1", "dev-2"]]


async def test_pre_start_container_is_not_called_when_not_required(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub, pre_start_required=False)
    await emulator.node.admit(make_pod("p", ("a", 1)))
    assert stub.calls.pre_start == []


async def test_a_failing_pre_start_leaves_the_pod_admitted_with_a_container_error(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, pre_start_required=True)
    stub.fail_pre_start = (grpc.StatusCode.UNAVAILABLE, "driver not loaded")
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("p", ("a", 1)))
    assert exc.value.reason == "CreateContainerConfigError"
    assert exc.value.message == (
        "container a: device plugin PreStartContainer rpc failed with err: "
        "rpc error: code = Unavailable desc = driver not loaded"
    )
    assert exc.value.detail["pod"]["name"] == "p"  # type: ignore[index]
    assert [p["name"] for p in emulator.node.status()["pods"]] == ["p"]  # type: ignore[index]
    assert held(emulator) == {R: ["dev-0"]}


async def test_a_slow_pre_start_hits_the_deadline(start_emulator: EmulatorFactory, start_stub: StubFactory) -> None:
    emulator = await start_emulator(pre_start_timeout=0.2)
    stub = await ready(emulator, start_stub, pre_start_required=True)
    stub.delay_s = 1.0
    with pytest.raises(errors.ControlError, match="code = DeadlineExceeded desc = context deadline exceeded"):
        await emulator.node.admit(make_pod("p", ("a", 1)))


async def test_admitting_the_same_pod_again_returns_the_cached_options_without_allocate(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub, pre_start_required=True)
    first = await emulator.node.admit(make_pod("p", ("a", 2), uid="u1"))
    stub.respond = lambda ids: api_pb2.AllocateResponse(
        container_responses=[api_pb2.ContainerAllocateResponse(envs={"X": "changed"})]
    )
    again = await emulator.node.admit(make_pod("p", ("a", 2), uid="u1"))
    assert again["containers"] == first["containers"]
    assert again["allocate_rpcs"] == 0
    assert len(stub.calls.allocate) == 1
    # A container (re)start calls PreStartContainer every time.
    assert stub.calls.pre_start == [["dev-0", "dev-1"], ["dev-0", "dev-1"]]


async def test_a_manifest_without_uid_names_the_same_pod_on_every_admit(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub)
    first = await emulator.node.admit(make_pod("p", ("a", 1)))
    again = await emulator.node.admit(make_pod("p", ("a", 1)))
    assert first["pod"] == again["pod"]
    assert len(stub.calls.allocate) == 1


async def test_a_changed_request_for_an_admitted_container_is_refused(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    await ready(emulator, start_stub)
    await emulator.node.admit(make_pod("p", ("a", 1), uid="u1"))
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("p", ("a", 2), uid="u1"))
    assert exc.value.message == (
        'Allocate failed due to pod "u1" container "a" changed request for resource "example.com/gpu" from 1 to 2, '
        "which is unexpected"
    )
    assert held(emulator) == {R: ["dev-0"]}


async def test_a_second_pod_with_the_same_name_and_another_uid_is_refused(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    await ready(emulator, start_stub)
    await emulator.node.admit(make_pod("p", ("a", 1), uid="u1"))
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("p", ("a", 1), uid="u2"))
    assert exc.value.reason == "AlreadyExists"


async def test_deleting_a_pod_frees_its_devices(emulator: Daemon, start_stub: StubFactory) -> None:
    await ready(emulator, start_stub)
    await emulator.node.admit(make_pod("p", ("a", 3)))
    result = await emulator.node.delete("ns", "p")
    assert result["freed"] == {"a": {R: ["dev-0", "dev-1", "dev-2"]}}
    assert held(emulator) == {R: []}
    assert checkpoint_entries(emulator) == []
    await emulator.node.admit(make_pod("q", ("a", 4)))
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.delete("ns", "p")
    assert exc.value.reason == "NotFound"


async def test_unhealthy_devices_are_skipped_and_held_ones_stay_held(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub)
    stub.set_health("dev-0", "Unhealthy")
    await eventually(lambda: capacity(emulator) == (4, 3))
    result = await emulator.node.admit(make_pod("p", ("a", 1)))
    assert result["containers"]["a"]["resources"] == {R: ["dev-1"]}  # type: ignore[index]
    stub.set_health("dev-1", "Unhealthy")
    await eventually(lambda: capacity(emulator) == (4, 2))
    assert held(emulator) == {R: ["dev-1"]}


async def test_admitting_a_held_device_that_turned_unhealthy_fails_like_the_kubelet(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await ready(emulator, start_stub)
    await emulator.node.admit(make_pod("p", ("a", 1), uid="u1"))
    stub.set_health("dev-0", "Unhealthy")
    await eventually(lambda: capacity(emulator) == (4, 3))
    with pytest.raises(errors.ControlError, match="previously allocated devices are no longer healthy"):
        await emulator.node.admit(make_pod("p", ("a", 1), uid="u1"))
    assert held(emulator) == {R: ["dev-0"]}


async def test_concurrent_admissions_never_share_a_device(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await ready(emulator, start_stub)
    stub.delay_s = 0.05
    results = await asyncio.gather(
        emulator.node.admit(make_pod("p1", ("a", 3))),
        emulator.node.admit(make_pod("p2", ("a", 3))),
        return_exceptions=True,
    )
    ok = [r for r in results if isinstance(r, dict)]
    failed = [r for r in results if isinstance(r, errors.ControlError)]
    assert len(ok) == 1 and len(failed) == 1
    assert "Requested: 3, Available: 1" in failed[0].message


async def test_two_resources_of_one_container_merge_first_wins(emulator: Daemon, start_stub: StubFactory) -> None:
    a = await start_stub("example.com/a", devices(1, prefix="a"), endpoint="a.sock")
    b = await start_stub("example.com/b", devices(1, prefix="b"), endpoint="b.sock")
    a.respond = lambda ids: api_pb2.AllocateResponse(
        container_responses=[api_pb2.ContainerAllocateResponse(envs={"V": "a"})]
    )
    b.respond = lambda ids: api_pb2.AllocateResponse(
        container_responses=[api_pb2.ContainerAllocateResponse(envs={"V": "b", "B": "1"})]
    )
    await eventually(
        lambda: capacity(emulator, "example.com/a") == (1, 1) and capacity(emulator, "example.com/b") == (1, 1)
    )
    p = pod.parse(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/b": 1, "example.com/a": 1}}}]},
        }
    )
    c = (await emulator.node.admit(p))["containers"]["c"]  # type: ignore[index]
    # Resources are merged in the order of the container's limits.
    assert c["envs"] == {"V": "b", "B": "1"}
    assert c["conflicts"] and c["conflicts"][0].startswith("Environment variable has conflicting setting")


async def test_single_numa_node_policy_aligns_devices_and_rejects_what_cannot_align(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator(topology_policy="single-numa-node")
    stub = await start_stub(devs=devices(4, numa=[0, 0, 1, 1]))
    await eventually(lambda: capacity(emulator) == (4, 4))
    stub.set_health("dev-0", "Unhealthy")
    await eventually(lambda: capacity(emulator) == (4, 3))
    result = await emulator.node.admit(make_pod("p", ("c", 2)))
    c = result["containers"]["c"]  # type: ignore[index]
    assert c["resources"] == {R: ["dev-2", "dev-3"]}
    assert c["numa_affinity"] == [1]
    with pytest.raises(errors.ControlError) as exc:
        await emulator.node.admit(make_pod("q", ("c", 2)))
    assert (exc.value.reason, exc.value.message) == (
        "TopologyAffinityError",
        "Resources cannot be allocated with Topology locality",
    )


async def test_a_failure_on_a_containers_second_resource_takes_its_first_back_out_of_the_checkpoint(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    a = await start_stub("example.com/a", devices(1, prefix="a"), endpoint="a.sock")
    b = await start_stub("example.com/b", devices(1, prefix="b"), endpoint="b.sock")
    b.fail_allocate = (grpc.StatusCode.INTERNAL, "b is broken")
    await eventually(
        lambda: capacity(emulator, "example.com/a") == (1, 1) and capacity(emulator, "example.com/b") == (1, 1)
    )
    p = pod.parse(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/a": 1, "example.com/b": 1}}}]},
        }
    )
    with pytest.raises(errors.ControlError, match="b is broken"):
        await emulator.node.admit(p)
    assert a.calls.allocate == [["a-0"]]
    assert checkpoint_entries(emulator) == []
    assert held(emulator) == {"example.com/a": [], "example.com/b": []}
