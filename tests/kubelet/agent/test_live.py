"""The node agent against an API server: real ``kubegpu kubelet --kubeconfig`` and ``kubegpu plugin`` processes.

Runs against the in-process API server, or unchanged against the cluster ``KUBEGPU_TEST_KUBECONFIG`` names:
node names come from the ``kube`` fixture (unique per run, deleted afterwards), pods live in its namespace,
the Lease the agent made is deleted here.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod

from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import faults
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

GPU = "nvidia.com/gpu"
OPTIONS = "kubegpu.io/runtime-options"


@pytest.fixture
def agent(kube: KubeEnv) -> Iterator[tuple[LocalNode, str]]:
    """One emulated dgx-a100 node playing Node ``<prefix>gpu-a``: the agent and its plugin as processes."""
    name = kube.name("gpu-a")
    node = LocalNode(
        machine="dgx-a100",
        kubelet_args=[
            "--kubeconfig",
            str(kube.kubeconfig),
            "--node-name",
            name,
            "--node-labels",
            "kubegpu.io/pool=test",
            "--register-with-taints",
            "kubegpu.io/dedicated=ml:NoSchedule",
            "--node-status-update-frequency",
            "1s",
            "--node-lease-duration-seconds",
            "4",
            "--capacity",
            "cpu=64,memory=512Gi",
        ],
    )
    with node:
        node.start_kubelet()
        node.start_plugin()
        yield node, name
    client = kube.client()
    with contextlib.suppress(ApiError):
        client.delete(Lease, name, namespace="kube-node-lease")
    client.close()


def gpu_pod(name: str, node_name: str, gpus: int) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": node_name,
                "restartPolicy": "Never",
                "tolerations": [{"key": "kubegpu.io/dedicated", "operator": "Exists"}],
                "containers": [
                    {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base", "resources": {"limits": {GPU: gpus}}}
                ],
            },
        }
    )


def node_gpus(client: Client, name: str) -> tuple[str, str] | None:
    """(capacity, allocatable) of nvidia.com/gpu in the Node's status, None before it reports."""
    try:
        node = client.get(Node, name)
    except ApiError:
        return None
    status = node.status
    if status is None or not status.capacity or GPU not in status.capacity:
        return None
    return status.capacity[GPU], (status.allocatable or {}).get(GPU, "")


def bound_requests(client: Client, node_name: str) -> int:
    """nvidia.com/gpu requested by the pods bound to the node and not finished: what the scheduler subtracts."""
    total = 0
    for pod in client.list(Pod, namespace="*", fields={"spec.nodeName": node_name}):
        if pod.status and pod.status.phase in ("Succeeded", "Failed"):
            continue
        for c in pod.spec.containers if pod.spec else []:
            limits = (c.resources.limits if c.resources else None) or {}
            total += int(limits.get(GPU, 0))
    return total


def ours(status: dict[str, Any], kube: KubeEnv) -> dict[str, dict[str, Any]]:
    """The emulator's pods of this test's namespace by name (a real cluster's DaemonSets may land on the node too)."""
    return {p["name"]: p for p in status["pods"] if p["namespace"] == kube.namespace}


def phase(client: Client, name: str) -> str | None:
    try:
        pod = client.get(Pod, name)
    except ApiError:
        return None
    return pod.status.phase if pod.status else None


def test_the_node_registers_with_the_plugins_gpus_labels_taints_ready_and_a_renewed_lease(
    kube: KubeEnv, agent: tuple[LocalNode, str]
) -> None:
    _, name = agent
    client = kube.client()
    assert wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    node = client.get(Node, name)
    assert node.metadata and node.metadata.labels
    assert node.metadata.labels["kubegpu.io/pool"] == "test"
    assert node.metadata.labels["kubernetes.io/hostname"] == name
    assert node.spec and node.spec.taints
    assert any(t.key == "kubegpu.io/dedicated" and t.effect == "NoSchedule" for t in node.spec.taints)
    assert node.status and node.status.conditions and node.status.capacity and node.status.allocatable
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert (node.status.capacity["cpu"], node.status.capacity["memory"], node.status.capacity["pods"]) == (
        "64",
        "512Gi",
        "110",
    )

    def renew_time() -> Any:
        try:
            lease = client.get(Lease, name, namespace="kube-node-lease")
        except ApiError:
            return None
        return lease.spec.renewTime if lease.spec else None

    first = wait_until(renew_time, within=15, what="the node's Lease")
    lease = client.get(Lease, name, namespace="kube-node-lease")
    assert lease.spec and (lease.spec.holderIdentity, lease.spec.leaseDurationSeconds) == (name, 4)
    wait_until(lambda: (renew_time() or first) > first, within=15, what="the Lease renewed")
    report = agent[0].status()["agent"]
    assert report["node_name"] == name and report["registered"] and report["pods_synced"]
    assert report["lease_renewals"] >= 2 and report["status_updates"] >= 1
    shown = agent[0].cli("kubelet", "status", "--socket-dir", str(agent[0].socket_dir))
    assert shown.returncode == 0
    assert f"node agent: Node {name} registered;" in shown.stdout


def test_a_4_gpu_pod_runs_with_4_gpus_of_that_node_and_leaves_no_trace_when_deleted(
    kube: KubeEnv, agent: tuple[LocalNode, str]
) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    node_ids = {d["id"] for d in local.status()["resources"][GPU]["devices"]}

    client.create(gpu_pod("train", name, 4))
    wait_until(lambda: phase(client, "train") == "Running", within=30, what="pod train Running")
    pod = client.get(Pod, "train")
    assert pod.metadata and pod.metadata.annotations and pod.status
    options = json.loads(pod.metadata.annotations[OPTIONS])
    visible = options["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(visible) == len(set(visible)) == 4
    assert set(visible) <= node_ids
    assert set(options["main"]["resources"][GPU]) == set(visible)
    assert {c.type: c.status for c in pod.status.conditions or []}["Ready"] == "True"
    (main,) = pod.status.containerStatuses or []
    assert main.ready and main.state and main.state.running

    # As the real kubelet: allocatable stays 8 (it counts healthy devices); the scheduler subtracts bound pods.
    assert node_gpus(client, name) == ("8", "8")
    assert 8 - bound_requests(client, name) == 4
    held = ours(local.status(), kube)
    assert set(held["train"]["containers"]["main"][GPU]) == set(visible)

    client.delete(Pod, "train")
    wait_until(lambda: phase(client, "train") is None, within=30, what="pod train gone from the API")
    assert local.wait_for(lambda s: not ours(s, kube) and not s["resources"][GPU]["allocated"], timeout=15)


def test_an_xid_on_a_gpu_makes_node_allocatable_drop(kube: KubeEnv, agent: tuple[LocalNode, str]) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    local.inject(faults.Fault(kind="xid", gpu=3, xid=79))
    wait_until(lambda: node_gpus(client, name) == ("8", "7"), within=30, what="allocatable 7 after XID 79")
    local.inject(faults.Fault(kind="recover", gpu=3))
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="allocatable 8 after recovery")


def test_a_pod_the_devices_cannot_satisfy_fails_with_unexpected_admission_error(
    kube: KubeEnv, agent: tuple[LocalNode, str]
) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    client.create(gpu_pod("greedy", name, 9))
    wait_until(lambda: phase(client, "greedy") == "Failed", within=30, what="pod greedy Failed")
    pod = client.get(Pod, "greedy")
    assert pod.status and pod.status.message
    assert pod.status.reason == "UnexpectedAdmissionError"
    assert pod.status.message == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 9, Available: 8, which is unexpected"
    )
    events = [e for e in client.list(Event) if e.involvedObject.name == "greedy"]
    assert any(e.reason == "UnexpectedAdmissionError" and e.type == "Warning" for e in events)
    assert not ours(local.status(), kube)


def test_sigterm_stops_the_agent_cleanly_and_removes_its_sockets(kube: KubeEnv, agent: tuple[LocalNode, str]) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    assert local.stop("kubelet", signal.SIGTERM) == 0
    assert not local.kubelet_socket.exists()
    assert not local.pod_resources_socket.exists()
    assert "node agent stopped" in local.log("kubelet")


def test_api_errors_and_a_compacted_watch_do_not_stop_the_agent(kube: KubeEnv, agent: tuple[LocalNode, str]) -> None:
    server = kube.require_server()
    _, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    server.faults.arm(3, 500, resource="pods/status", verb="patch")
    client.create(gpu_pod("first", name, 1))
    wait_until(lambda: phase(client, "first") == "Running", within=30, what="pod first Running despite 3 errors")

    server.compact()
    server.close_watches()
    client.create(gpu_pod("second", name, 1))
    wait_until(lambda: phase(client, "second") == "Running", within=30, what="pod second Running after a relist")


def test_a_restarted_agent_keeps_running_pods_and_finishes_deletions_made_while_it_was_down(
    kube: KubeEnv, agent: tuple[LocalNode, str]
) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    client.create(gpu_pod("keep", name, 2))
    client.create(gpu_pod("drop", name, 1))
    wait_until(lambda: phase(client, "keep") == phase(client, "drop") == "Running", within=30, what="both Running")
    kept = ours(local.status(), kube)["keep"]["containers"]["main"][GPU]

    assert local.stop("kubelet") == 0
    client.delete(Pod, "drop")  # bound: it waits for its kubelet
    local.start_kubelet()

    wait_until(lambda: phase(client, "drop") is None, within=30, what="drop's deletion finished by the new agent")
    status = local.wait_for(lambda s: list(ours(s, kube)) == ["keep"], timeout=15)
    assert ours(status, kube)["keep"]["containers"]["main"][GPU] == kept
    assert phase(client, "keep") == "Running"
    assert status["node"]["allocate_rpcs"] == 0  # restored from the checkpoint, not allocated again


def test_an_unchanged_status_is_not_resent_every_tick_and_a_lease_someone_else_wrote_is_taken_back(
    kube: KubeEnv, agent: tuple[LocalNode, str]
) -> None:
    local, name = agent
    client = kube.client()
    wait_until(lambda: node_gpus(client, name) == ("8", "8"), within=30, what="Node reports 8 GPUs")
    before = local.status()["agent"]
    # The lease is renewed every second (duration 4 s); three renewals are three status ticks (1 s) too.
    wait_until(
        lambda: local.status()["agent"]["lease_renewals"] >= before["lease_renewals"] + 3,
        within=20,
        what="three more lease renewals",
    )
    assert local.status()["agent"]["status_updates"] == before["status_updates"]

    lease = client.get(Lease, name, namespace="kube-node-lease")
    assert lease.spec
    lease.spec.holderIdentity = "someone-else"
    client.replace(lease)

    def holder() -> str | None:
        current = client.get(Lease, name, namespace="kube-node-lease")
        return current.spec.holderIdentity if current.spec else None

    wait_until(lambda: holder() == name, within=20, what="the agent holding its Lease again")
