"""The chart's node-agent RBAC is least privilege and sufficient: the rendered Deployment's two containers (the agent
and its plugin), run through the recording proxy, ask only what the ClusterRole and the kube-node-lease Role grant,
and over a full life — registration, a running pod, a rejected pod, an API error retried, a deletion, a restart —
use every verb they grant. The proxy speaks plain HTTP to the in-process server, so on a real cluster this skips.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from tests.deploy import helmrender
from tests.deploy.podrun import Pod as RenderedPod
from tests.deploy.podrun import start
from tests.deploy.rbac import RecordingProxy, allows, grants
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]
pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")

GPU = "nvidia.com/gpu"
LEASES = "kube-node-lease"


def rules(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)[
        "rules"
    ]
    return found


def gpu_pod(name: str, node: str, gpus: int) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {GPU: gpus}}}],
            },
        }
    )


def phase(client: Client, name: str) -> str | None:
    try:
        pod = client.get(Pod, name)
    except ApiError:
        return None
    return pod.status.phase if pod.status else None


def test_the_node_agent_asks_only_and_all_of_what_its_rbac_grants(
    kube: KubeEnv, sock_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    server = kube.require_server()
    node_name = kube.name("agent")
    objects = helmrender.render({"nodeAgent": {"enabled": True, "nodeName": node_name}})
    cluster_rules = rules(objects, "ClusterRole", "kubegpu-node-agent")
    lease_rules = rules(objects, "Role", "kubegpu-node-agent-lease")
    deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "kubegpu-node-agent")
    pod = RenderedPod(deployment, objects, sock_dir, node_name)
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    client = kube.client()
    with RecordingProxy(upstream) as proxy:
        agent_argv, agent_env = pod.command("node-agent")
        # The rendered kubeconfig names kubernetes.default.svc; here the same file points at the proxy.
        kubeconfig = Path(next(a for a in agent_argv if a.startswith("--kubeconfig=")).split("=", 1)[1])
        proxy.kubeconfig(kubeconfig)
        agent_argv += ["--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "4"]
        plugin_argv, plugin_env = pod.command("device-plugin")
        agent = start(procs, agent_argv, agent_env, sock_dir / "agent.log")
        start(procs, plugin_argv, plugin_env, sock_dir / "plugin.log")

        def gpus() -> str | None:
            try:
                node = client.get(Node, node_name)
            except ApiError:
                return None
            return ((node.status.allocatable if node.status else None) or {}).get(GPU)

        wait_until(lambda: gpus() == "8", within=60, what="the Node with 8 GPUs")
        client.create(gpu_pod("runs", node_name, 2))
        wait_until(lambda: phase(client, "runs") == "Running", within=30, what="pod runs Running")
        client.create(gpu_pod("rejected", node_name, 9))
        wait_until(lambda: phase(client, "rejected") == "Failed", within=30, what="pod rejected Failed")
        server.faults.arm(1, 500, resource="pods/status", verb="patch")
        client.create(gpu_pod("retried", node_name, 1))
        wait_until(lambda: phase(client, "retried") == "Running", within=30, what="pod retried Running")
        wait_until(
            lambda: any(r.resource == "pods" and r.verb == "get" for r in proxy.recorded()),
            within=30,
            what="the agent reading the pod again after the error",
        )
        client.delete(Pod, "runs")
        wait_until(lambda: phase(client, "runs") is None, within=30, what="pod runs deleted")

        agent.terminate()
        assert agent.wait(15) == 0
        procs.remove(agent)
        start(procs, agent_argv, agent_env, sock_dir / "agent.log")  # adopts the existing Node
        wait_until(
            lambda: sum(r.resource == "nodes" and r.verb == "get" for r in proxy.recorded()) >= 1,
            within=30,
            what="the restarted agent reads its existing Node",
        )
        wait_until(
            lambda: sum(r.resource == "leases" and r.verb == "update" for r in proxy.recorded()) >= 2,
            within=30,
            what="lease renewals",
        )
        asked = proxy.recorded()
    client.delete(Lease, node_name, namespace=LEASES)

    def granted(request: Any) -> bool:
        return allows(cluster_rules, request) or (request.namespace == LEASES and allows(lease_rules, request))

    denied = [str(r) for r in asked if not granted(r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = (grants(cluster_rules) | grants(lease_rules)) - {(r.group, r.resource, r.verb) for r in asked}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"
