"""``kubegpu scheduler`` as a real process against an API server (the in-process one, or a real cluster).

Scenarios of issue 11: the tutorial's profile packs / spreads, a GPU model no node has, a gang of 4 where 3 fit,
preemption through the Eviction API (with and without a PodDisruptionBudget), two replicas behind one Lease,
and SIGKILL in the middle of 200 pods.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.resources.scheduling_v1 import PriorityClass

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import plugin_config
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

from .cluster import (
    CRD,
    SchedulerProcess,
    add_node,
    create_pod,
    events,
    finish_deletions,
    fit_profile,
    node_of,
    pod_manifest,
    pods,
    set_running,
    write_config,
)

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

PodGroup = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")


@pytest.fixture
def start(kube: KubeEnv, tmp_path: Path) -> Iterator[object]:
    """Start scheduler processes for this test; all stopped afterwards."""
    started: list[SchedulerProcess] = []

    def run(profiles: list[dict[str, object]], *flags: str, lease: str = "lease") -> SchedulerProcess:
        n = len(started)
        config = write_config(tmp_path / f"config-{n}.yaml", profiles, kube.namespace, kube.name(lease))
        proc = SchedulerProcess(kube, config, tmp_path / f"scheduler-{n}.log", *flags)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        proc.stop()


def _bound(kube: KubeEnv, name: str) -> str:
    return wait_until(lambda: node_of(kube.client(), kube.namespace, name), within=30, what=f"pod {name} bound")


def test_tutorial_profile_packs_onto_the_busy_node_and_least_allocated_spreads(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    busy, empty = add_node(kube, "busy"), add_node(kube, "empty")
    for i in range(6):  # bound by someone else: the scheduler must count them
        create_pod(kube, f"running-{i}", "other-scheduler", node_name=busy)
    most, least = kube.name("most"), kube.name("least")
    proc = start([fit_profile(most, "MostAllocated"), fit_profile(least, "LeastAllocated")])
    create_pod(kube, "packed", most)
    assert _bound(kube, "packed") == busy
    create_pod(kube, "spread", least)
    assert _bound(kube, "spread") == empty
    client = kube.client()
    packed = client.get(Pod, "packed", namespace=kube.namespace)
    devices = packed.metadata.annotations["kubegpu.io/gpu-devices"].split(",")  # type: ignore[index,union-attr]
    assert len(devices) == 1
    scheduled = wait_until(lambda: events(client, kube.namespace, "Scheduled").get("packed"), within=10, what="event")
    assert scheduled[0].note == f"Successfully assigned {kube.namespace}/packed to {busy}", proc.text()
    assert proc.get("/healthz") == (200, "ok\n") and proc.get("/readyz") == (200, "ok\n")
    status, metrics = proc.get("/metrics")
    assert status == 200
    assert f'scheduler_schedule_attempts_total{{profile="{most}",result="scheduled"}} 1.0' in metrics
    assert (
        "kubegpu_scheduler_leader 1.0" in metrics and "scheduler_pod_scheduling_sli_duration_seconds_count" in metrics
    )


def test_a_gpu_model_no_node_has_gets_failed_scheduling_with_reason_counts(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    add_node(kube, "a"), add_node(kube, "b")
    name = kube.name("s")
    start([fit_profile(name)])
    create_pod(kube, "h100", name, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    client = kube.client()
    failed = wait_until(
        lambda: events(client, kube.namespace, "FailedScheduling").get("h100"), within=30, what="FailedScheduling"
    )
    note = failed[0].note or ""
    assert re.match(r"0/(\d+) nodes are available: .*\d+ node\(s\) didn't match Pod's node affinity/selector", note)
    if not kube.real:  # a real cluster has nodes of its own in the count
        assert note == (
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
    pod = client.get(Pod, "h100", namespace=kube.namespace)
    (cond,) = [c for c in (pod.status.conditions or []) if c.type == "PodScheduled"]  # type: ignore[union-attr]
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", note)
    assert not node_of(client, kube.namespace, "h100")


def test_a_gang_of_four_where_three_fit_binds_none_until_a_node_is_added(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    kube.ensure_crd(yaml.safe_load(CRD.read_text()))
    for i in range(3):
        add_node(kube, f"g{i}")
    client = kube.client()
    client.create(
        PodGroup.from_dict({"metadata": {"name": "train"}, "spec": {"minMember": 4, "scheduleTimeoutSeconds": 2}}),
        namespace=kube.namespace,
    )
    name = kube.name("s")
    start([fit_profile(name)])
    members = [f"worker-{i}" for i in range(4)]
    for m in members:
        create_pod(kube, m, name, gpus=8, labels={"scheduling.x-k8s.io/pod-group": "train"})

    def all_failed() -> bool:
        failed = events(client, kube.namespace, "FailedScheduling")
        return all(any("minMember 4" in (e.note or "") for e in failed.get(m, [])) for m in members)

    wait_until(all_failed, within=30, what="FailedScheduling on every member after the timeout")
    note = events(client, kube.namespace, "FailedScheduling")["worker-0"][0].note or ""
    assert "3 of minMember 4 pods fit at once" in note and "scheduleTimeoutSeconds=2" in note
    assert not any(node_of(client, kube.namespace, m) for m in members)
    add_node(kube, "g3")
    nodes = [_bound(kube, m) for m in members]
    assert len(set(nodes)) == 4

    def phase() -> str:
        group = client.get(PodGroup, "train", namespace=kube.namespace)
        return str((group.get("status") or {}).get("phase", ""))

    assert wait_until(phase, within=10, what="PodGroup phase") == "Scheduled"


def _priority_class(kube: KubeEnv, suffix: str, value: int) -> str:
    name = kube.name(suffix)
    kube.client().create(PriorityClass.from_dict({"metadata": {"name": name}, "value": value}))
    return name


@pytest.mark.parametrize("with_pdb", [False, True], ids=["evicts-lowest", "pdb-forbids-so-another-victim"])
def test_a_high_priority_pod_preempts_through_the_eviction_api(kube: KubeEnv, start, with_pdb: bool) -> None:  # type: ignore[no-untyped-def]
    low, mid, high = (_priority_class(kube, s, v) for s, v in (("low", 10), ("mid", 20), ("high", 1000)))
    n1, n2 = add_node(kube, "p1", gpus=1), add_node(kube, "p2", gpus=1)
    create_pod(kube, "victim-low", "other", node_name=n1, priority_class=low, labels={"app": "protected"})
    create_pod(kube, "victim-mid", "other", node_name=n2, priority_class=mid)
    client = kube.client()
    for victim_name in ("victim-low", "victim-mid"):
        set_running(client, kube.namespace, victim_name)  # as their kubelet reports them (budgets count Ready pods)
    if with_pdb:
        client.create(
            PodDisruptionBudget.from_dict(
                {
                    "metadata": {"name": "protect"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "protected"}}},
                }
            ),
            namespace=kube.namespace,
        )
    name = kube.name("s")
    proc = start([fit_profile(name)])
    create_pod(kube, "urgent", name, priority_class=high)

    def bound() -> str:
        finish_deletions(client, kube.namespace)  # the kubelet's part once a victim's containers stop
        return node_of(client, kube.namespace, "urgent")

    expected_node, victim, survivor = (n2, "victim-mid", "victim-low") if with_pdb else (n1, "victim-low", "victim-mid")
    try:
        assert wait_until(bound, within=30, what="preemptor bound") == expected_node
    except AssertionError:
        print(proc.text())
        raise
    left = pods(client, kube.namespace)
    assert victim not in left and survivor in left
    preempted = events(client, kube.namespace, "Preempted")
    assert list(preempted) == [victim]
    assert (preempted[victim][0].note or "").endswith(f"on node {expected_node}")


def _holder(kube: KubeEnv, lease: str) -> str:
    try:
        obj = kube.client().get(Lease, lease, namespace=kube.namespace)
    except ApiError:
        return ""
    return (obj.spec.holderIdentity if obj.spec else None) or ""


FAST_LEASE = ("--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
              "--leader-elect-retry-period", "500ms")  # fmt: skip


def test_two_replicas_only_the_lease_holder_binds_and_the_other_takes_over_after_sigkill(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    for i in range(2):
        add_node(kube, f"r{i}")
    name, lease = kube.name("s"), kube.name("lease")
    first = start([fit_profile(name)], *FAST_LEASE)
    holder = wait_until(lambda: _holder(kube, lease), within=30, what="a lease holder")
    second = start([fit_profile(name)], *FAST_LEASE)
    procs = {first.pid: first, second.pid: second}
    leader = procs[int(holder.rsplit("_", 1)[1])]
    standby = second if leader is first else first
    for i in range(5):
        create_pod(kube, f"before-{i}", name)
    for i in range(5):
        _bound(kube, f"before-{i}")
    client = kube.client()
    # The Scheduled event follows the binding; let the leader write them before it dies.
    wait_until(lambda: len([p for p in events(client, kube.namespace, "Scheduled") if p.startswith("before")]) == 5,
               within=10, what="Scheduled events of the first pods")  # fmt: skip
    leader.kill()
    killed_at = time.monotonic()
    for i in range(5):
        create_pod(kube, f"after-{i}", name)
    new_holder = wait_until(lambda: (h := _holder(kube, lease)) != holder and h, within=20, what="a new holder")
    took_over = time.monotonic() - killed_at
    assert new_holder.endswith(f"_{standby.pid}")
    assert took_over < 4 + 3, f"takeover took {took_over:.1f} s"
    for i in range(5):
        _bound(kube, f"after-{i}")

    def all_scheduled() -> dict[str, list[Any]] | None:
        found = events(client, kube.namespace, "Scheduled")
        return found if len(found) == 10 else None

    scheduled = wait_until(all_scheduled, within=10, what="Scheduled events of all pods")
    instances = {p: {e.reportingInstance for e in evs} for p, evs in scheduled.items()}
    assert all(instances[f"before-{i}"] == {holder} for i in range(5))
    assert all(instances[f"after-{i}"] == {new_holder} for i in range(5))
    assert all(len(evs) == 1 for evs in scheduled.values())


def test_sigkill_in_the_middle_of_200_pods_and_restart_binds_every_pod_exactly_once(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    nodes = [add_node(kube, f"k{i:02d}") for i in range(25)]
    name = kube.name("s")
    first = start([fit_profile(name)], *FAST_LEASE)
    client = kube.client()
    for i in range(200):
        client.create(Pod.from_dict(pod_manifest(kube, f"p{i:03d}", name)))
    wait_until(lambda: sum(1 for p in pods(client, kube.namespace).values() if p.spec.nodeName) >= 40,  # type: ignore[union-attr]
               within=60, what="40 pods bound")  # fmt: skip
    first.kill()
    start([fit_profile(name)], *FAST_LEASE)

    def all_bound() -> bool:
        return all(p.spec.nodeName for p in pods(client, kube.namespace).values())  # type: ignore[union-attr]

    wait_until(all_bound, within=90, what="all 200 pods bound")
    devices: dict[str, Counter[str]] = {n: Counter() for n in nodes}
    for pod in pods(client, kube.namespace).values():
        for d in pod.metadata.annotations["kubegpu.io/gpu-devices"].split(","):  # type: ignore[index,union-attr]
            devices[pod.spec.nodeName][d] += 1  # type: ignore[union-attr,index]
    assert all(len(c) == 8 and set(c.values()) == {1} for c in devices.values()), devices
    assert all(len(evs) <= 1 for evs in events(client, kube.namespace, "Scheduled").values())


def test_a_recorded_assignment_from_before_a_crash_is_honoured_on_restart(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    busy, empty = add_node(kube, "busy"), add_node(kube, "empty")
    create_pod(kube, "running", "other", node_name=busy)
    name = kube.name("s")
    client = kube.client()
    # What a scheduler killed between writing its choice and binding leaves behind: MostAllocated would now pick
    # "busy", but the recorded choice (and its GPUs) was "empty".
    body = pod_manifest(kube, "resumed", name)
    body["metadata"]["annotations"] = {"kubegpu.io/assigned-node": empty, "kubegpu.io/gpu-devices": "3"}
    client.create(Pod.from_dict(body))
    start([fit_profile(name)])
    assert _bound(kube, "resumed") == empty
    pod = client.get(Pod, "resumed", namespace=kube.namespace)
    assert pod.metadata.annotations["kubegpu.io/gpu-devices"] == "3"  # type: ignore[index,union-attr]


def test_a_gang_plan_is_completed_only_when_min_member_pods_carry_it(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    kube.ensure_crd(yaml.safe_load(CRD.read_text()))
    nodes = [add_node(kube, f"g{i}") for i in range(4)]
    client = kube.client()
    for group in ("complete", "partial"):
        client.create(
            PodGroup.from_dict({"metadata": {"name": group}, "spec": {"minMember": 2}}), namespace=kube.namespace
        )
    name = kube.name("s")
    # "complete": both members carry plan p1 (a crash came after the plan was written, before the binds).
    # "partial": one member of two carries plan p2 (the crash came while the plan was being written).
    planned = {("complete", 0): (nodes[3], "p1"), ("complete", 1): (nodes[2], "p1"), ("partial", 0): (nodes[1], "p2")}
    for group in ("complete", "partial"):
        for i in range(2):
            body = pod_manifest(kube, f"{group}-{i}", name, gpus=4, labels={"scheduling.x-k8s.io/pod-group": group})
            if (group, i) in planned:
                node, plan = planned[(group, i)]
                body["metadata"]["annotations"] = {"kubegpu.io/assigned-node": node, "kubegpu.io/gang-plan": plan}
            client.create(Pod.from_dict(body))
    proc = start([fit_profile(name)], "--log-level", "debug")
    assert [_bound(kube, f"complete-{i}") for i in range(2)] == [nodes[3], nodes[2]]
    _bound(kube, "partial-0"), _bound(kube, "partial-1")
    partial = [client.get(Pod, f"partial-{i}", namespace=kube.namespace) for i in range(2)]
    plans = {p.metadata.annotations.get("kubegpu.io/gang-plan") for p in partial}  # type: ignore[union-attr]
    assert len(plans) == 1 and "p2" not in plans, proc.text()  # planned again, together


def test_a_leader_that_cannot_renew_stops_binding_and_exits(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    server = kube.require_server()
    add_node(kube, "l0")
    name, lease = kube.name("s"), kube.name("lease")
    proc = start([fit_profile(name)], *FAST_LEASE)
    wait_until(lambda: _holder(kube, lease), within=30, what="a lease holder")
    create_pod(kube, "while-leading", name)
    _bound(kube, "while-leading")
    server.fail_next(100_000, status=500, resource="leases")
    failed_at = time.monotonic()
    code = wait_until(lambda: proc.proc.poll() is not None and proc.proc.returncode, within=20, what="exit")
    stopped_after = time.monotonic() - failed_at
    server.faults.clear()
    assert code == 1 and "leader election lost" in proc.text()
    assert stopped_after < 4, f"stopped {stopped_after:.1f} s after renewals began to fail (lease is 4 s)"


def test_sigterm_exits_0_and_releases_the_lease(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    name, lease = kube.name("s"), kube.name("lease")
    proc = start([fit_profile(name)], *FAST_LEASE)
    wait_until(lambda: _holder(kube, lease), within=30, what="a lease holder")
    assert proc.stop() == 0
    assert _holder(kube, lease) == ""
    assert "scheduler stopped" in proc.text()


def test_preemption_on_a_node_publishing_its_gpus_evicts_the_pod_holding_a_healthy_gpu(kube: KubeEnv, start) -> None:  # type: ignore[no-untyped-def]
    """The plugin has just marked GPU 0 Unhealthy (``kubegpu.io/gpus``); the kubelet's status still reports 4
    allocatable (it lags the plugin by up to its status frequency). Evicting ``sick``, which holds GPU 0, would
    free nothing the preemptor can use: the victim is ``low`` on GPU 1, and the preemptor gets GPU 1."""
    low, mid, high = (_priority_class(kube, s, v) for s, v in (("low", 10), ("mid", 20), ("high", 1000)))
    name = add_node(kube, "sick", gpus=4)
    machine = profiles.load("pcie-4xt4")
    served = resource_map.build(machine, plugin_config()).resources
    published = nodegpus.describe(machine, served, {"nvidia.com/gpu": {machine.gpus[0].uuid}})
    client = kube.client()
    client.patch(Node, name, {"metadata": {"annotations": nodegpus.node_annotations(published)}})
    uuid = [g.uuid for g in machine.gpus]
    for pod_name, priority_class, gpus in (("sick", low, [0]), ("low", mid, [1]), ("keep", high, [2, 3])):
        body = pod_manifest(kube, pod_name, "other", gpus=len(gpus), priority_class=priority_class, node_name=name)
        body["metadata"]["annotations"] = {"kubegpu.io/gpu-devices": ",".join(uuid[i] for i in gpus)}
        client.create(Pod.from_dict(body))
        set_running(client, kube.namespace, pod_name)
    profile = kube.name("s")
    proc = start([fit_profile(profile)])
    create_pod(kube, "urgent", profile, priority_class=high)

    def bound() -> str:
        finish_deletions(client, kube.namespace)  # the kubelet's part once a victim's containers stop
        return node_of(client, kube.namespace, "urgent")

    try:
        assert wait_until(bound, within=30, what="preemptor bound") == name
    except AssertionError:
        print(proc.text())
        raise
    assert list(events(client, kube.namespace, "Preempted")) == ["low"]
    left = pods(client, kube.namespace)
    assert "sick" in left and "low" not in left
    annotations = (left["urgent"].metadata.annotations if left["urgent"].metadata else None) or {}
    assert annotations["kubegpu.io/gpu-devices"] == uuid[1]
