"""scheduler → API → node agent → plugin with ``--node-name``: the container gets exactly the GPUs the scheduler
wrote on the pod (``kubegpu.io/gpu-devices``), not the ones the plugin's own policy would pick. All real processes,
on the in-process API server (or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names; the profile and node label are this
test's own, so no other scheduler or node takes the pods)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from kubegpu import placement
from kubegpu.demo.localnode import LocalNode, free_port
from kubegpu.gpu import profiles
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

GPU = "nvidia.com/gpu"
POOL = "kubegpu.io/test-pool"
MACHINE = profiles.load("dgx-a100")


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path) -> Iterator[tuple[LocalNode, str, str]]:
    """One dgx-a100 node (agent + plugin publishing on it) and a scheduler; yields (node, its name, schedulerName)."""
    profile = kube.name("gpu-scheduler")
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": profile}],
            }
        )
    )
    name = kube.name("gpu-a")
    node = LocalNode(
        kubelet_args=[
            "--kubeconfig",
            str(kube.kubeconfig),
            "--node-name",
            name,
            "--node-labels",
            f"{POOL}={kube.namespace}",
            "--node-status-update-frequency",
            "1s",
        ],
        plugin_args=["--node-name", name, "--kubeconfig", str(kube.kubeconfig)],
    )
    with node:
        node.start_kubelet()
        node.start_plugin()
        node.spawn(
            "scheduler",
            [
                "scheduler",
                "--kubeconfig",
                str(kube.kubeconfig),
                "--config",
                str(config),
                "--metrics-listen",
                f"127.0.0.1:{free_port()}",
            ],
        )
        yield node, name, profile
    with contextlib.suppress(ApiError):
        kube.client().delete(Lease, name, namespace="kube-node-lease")


def _pod(name: str, profile: str, namespace: str, gpus: int) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": profile,
                "nodeSelector": {POOL: namespace},
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: gpus}}}],
            },
        }
    )


def test_the_container_gets_the_gpus_in_the_schedulers_annotation(
    kube: KubeEnv, cluster: tuple[LocalNode, str, str]
) -> None:
    node, name, profile = cluster
    client = kube.client()

    def ready() -> bool:
        try:
            got = client.get(Node, name)
        except ApiError as exc:  # the node agent has not registered its Node yet
            if exc.status.code == 404:
                return False
            raise
        annotations = (got.metadata.annotations if got.metadata else None) or {}
        allocatable = (got.status.allocatable if got.status else None) or {}
        taints = (got.spec.taints if got.spec else None) or []
        return (
            allocatable.get(GPU) == "8"
            and "kubegpu.io/gpu-devices" in annotations
            and not any(t.key == "node.kubernetes.io/not-ready" for t in taints)
        )

    wait_until(ready, within=60, what=f"node {name} Ready with 8 GPUs and its published GPUs")

    def running(pod_name: str) -> Pod | None:
        pod = client.get(Pod, pod_name)
        return pod if pod.status and pod.status.phase == "Running" else None

    placed: dict[str, list[str]] = {}
    for pod_name, gpus in (("one", 1), ("four", 4)):
        client.create(_pod(pod_name, profile, kube.namespace, gpus))
        try:
            pod = wait_until(lambda pod_name=pod_name: running(pod_name), within=60, what=f"pod {pod_name} Running")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{node.log_tail('scheduler', 30)}\n{node.log_tail('plugin', 30)}") from None
        assert pod.metadata is not None and pod.metadata.annotations is not None
        chosen = pod.metadata.annotations["kubegpu.io/gpu-devices"].split(",")
        options = json.loads(pod.metadata.annotations["kubegpu.io/runtime-options"])
        visible = options["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
        assert sorted(visible) == sorted(chosen), pod_name
        assert len(chosen) == gpus
        placed[pod_name] = chosen
    # With one GPU taken, the plugin's own policy would give the 4-GPU pod another set than the scheduler chose.
    uuid = [g.uuid for g in MACHINE.gpus]
    free = [i for i in range(8) if uuid[i] not in placed["one"]]
    own = {uuid[i] for i in placement.pick("topology", MACHINE.topology, free, [], 4)}
    if own != set(placed["four"]):
        assert f"pod={kube.namespace}/four" in node.log("plugin")  # honoured, logged with the pod's name
