"""The chart's device-plugin ClusterRole (``devicePlugin.publishGpus``, on with the scheduler) is least privilege and
sufficient: the rendered DaemonSet's plugin container, run through the recording proxy, asks only what the role
grants and uses every verb it grants, over the node-honours-the-pick story — it publishes its GPUs on its Node, the
scheduler places a 1-GPU and a 4-GPU pod there, and the plugin makes the kubelet allocate exactly the devices the
scheduler wrote on each (its pod cache: list + watch of the node's pods), then restarts and does it all again. The
node agent and the scheduler talk to the API server directly (their own RBAC is checked elsewhere). The proxy
speaks plain HTTP to the in-process server, so on a real cluster this skips.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from kubegpu.demo.localnode import LocalNode, free_port
from kubegpu.scheduling.core import exactgpus
from tests.deploy import helmrender
from tests.deploy.podrun import MACHINE, daemonset, start
from tests.deploy.podrun import Pod as RenderedPod
from tests.deploy.rbac import RecordingProxy, allows, grants
from tests.e2e.gpucluster import GPU, NOT_READY, POOL, running_pod, scheduler_config
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]
pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")


def rules(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)[
        "rules"
    ]
    return found


@pytest.fixture
def node_host(kube: KubeEnv) -> Iterator[tuple[Path, str, LocalNode]]:
    """A temporary host root with the node agent (emulator + ``--node-name``) where a kubelet's sockets are, and
    a scheduler beside it; yields (host root, node name, the scheduler's LocalNode)."""
    name = kube.name("gpu-node")
    node = LocalNode(
        machine=MACHINE,
        kubelet_args=[
            "--kubeconfig", str(kube.kubeconfig), "--node-name", name, "--node-labels",
            f"{POOL}={kube.namespace}", "--node-status-update-frequency", "1s",
        ],
    )  # fmt: skip
    root = node.root
    node.root = root / "var" / "lib" / "kubelet"
    scheduler = LocalNode(machine=None)
    try:
        node.start_kubelet()
        yield root, name, scheduler
    finally:
        scheduler.close()
        node.close()
        node.root = root
        node.close()
        with contextlib.suppress(ApiError):
            kube.client().delete(Lease, name, namespace="kube-node-lease")


def test_the_device_plugin_asks_only_and_all_of_what_its_cluster_role_grants(
    kube: KubeEnv, node_host: tuple[Path, str, LocalNode], procs: list[subprocess.Popen[bytes]]
) -> None:
    kube.require_server()
    host, node_name, scheduler = node_host
    objects = helmrender.render()
    granted = rules(objects, "ClusterRole", "kubegpu-device-plugin")
    profile = kube.name("gpu-scheduler")
    config = host / "scheduler.yaml"
    config.write_text(scheduler_config(profile))
    scheduler.spawn(
        "scheduler",
        ["scheduler", "--kubeconfig", str(kube.kubeconfig), "--config", str(config), "--metrics-listen",
         f"127.0.0.1:{free_port()}"],
    )  # fmt: skip
    client = kube.client()
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    plugin = RenderedPod(daemonset(objects, "device-plugin"), objects, host, node_name)

    def ready() -> bool:
        try:
            got = client.get(Node, node_name)
        except ApiError:
            return False
        annotations = (got.metadata.annotations if got.metadata else None) or {}
        allocatable = (got.status.allocatable if got.status else None) or {}
        taints = (got.spec.taints if got.spec else None) or []
        return (
            allocatable.get(GPU) == "8"
            and exactgpus.GPUS_ANNOTATION in annotations
            and not any(t.key == NOT_READY for t in taints)
        )

    def run(pod_name: str, gpus: int) -> None:
        client.create(
            Pod.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod_name},
                    "spec": {
                        "schedulerName": profile,
                        "nodeSelector": {POOL: kube.namespace},
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: gpus}}}],
                    },
                }
            )
        )

        def running() -> Pod | None:
            pod = client.get(Pod, pod_name)
            return pod if pod.status and pod.status.phase == "Running" else None

        got = running_pod(wait_until(running, within=60, what=f"pod {pod_name} Running"))
        assert sorted(got.main) == sorted(got.chosen) and len(got.chosen) == gpus

    with RecordingProxy(upstream) as proxy:
        in_cluster = {"KUBEGPU_MACHINE": MACHINE, "KUBECONFIG": str(proxy.kubeconfig(host / "plugin-kubeconfig"))}
        argv, env = plugin.command("device-plugin", in_cluster)
        assert env["KUBEGPU_NODE_NAME"] == node_name
        log = host / "plugin.log"
        first = start(procs, argv, env, log)
        wait_until(ready, within=60, what=f"node {node_name} Ready with its published GPUs")
        run("one", 1)
        run("four", 4)
        first.terminate()
        assert first.wait(15) == 0
        procs.remove(first)
        client.delete(Pod, "one")
        start(procs, argv, env, log)  # a restarted plugin lists the node's pods again and honours the next pick
        wait_until(lambda: not [p for p in client.list(Pod) if p.metadata and p.metadata.name == "one"],
                   within=30, what="pod one gone")  # fmt: skip
        run("two", 2)
        asked = proxy.recorded()
    assert "honouring the scheduler's pick" in log.read_text()
    denied = [str(r) for r in asked if not allows(granted, r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = grants(granted) - {(r.group, r.resource, r.verb) for r in asked}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"
