"""RBAC is least privilege and sufficient: a component's containers, run as rendered through a recording proxy to the
API server, ask only what the chart's rules grant, and use every rule the chart grants them.

The config-manager here; the scheduler's and the node agent's follow the same way once their programs are on this
branch. The proxy speaks plain HTTP to the in-process server, so on a real cluster these tests skip.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import yaml
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from kubegpu.configmanager import switch
from tests.deploy import helmrender
from tests.deploy.podrun import Pod, daemonset, start
from tests.deploy.rbac import RecordingProxy, Request, allows, attributes, grants
from tests.polling import wait_until

SLICED = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n"


def rules(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)[
        "rules"
    ]
    return found


def test_request_attributes_and_the_rule_match_follow_rbac() -> None:
    lease = attributes("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kubegpu-scheduler", {})
    assert lease == Request("coordination.k8s.io", "leases", "ns", "kubegpu-scheduler", "update")
    assert attributes("GET", "/api/v1/nodes", {"watch": "true"}) == Request("", "nodes", "", "", "watch")
    assert attributes("PATCH", "/api/v1/namespaces/a/pods/p/status", {}) == Request(
        "", "pods/status", "a", "p", "patch"
    )
    assert attributes("GET", "/apis/apps/v1", {}) is None
    named = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["x"], "verbs": ["update"]}
    ]
    assert allows(named, Request("coordination.k8s.io", "leases", "ns", "x", "update"))
    assert not allows(named, Request("coordination.k8s.io", "leases", "ns", "y", "update"))
    assert not allows(named, Request("", "pods", "ns", "x", "update"))


def test_the_config_manager_asks_only_and_all_of_what_its_cluster_role_grants(
    host: Path, procs: list[Any], kube: Any
) -> None:
    kube.require_server()
    values = {"config": {"map": {"default": "version: v1\n", "sliced": SLICED}, "default": "default"}}
    objects = helmrender.render(values)
    granted = rules(objects, "ClusterRole", "kubegpu-config-manager")
    node_name = kube.name("gpu-node")
    kube.client().create(Node(metadata=ObjectMeta(name=node_name)))
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    pod = Pod(daemonset(objects, "device-plugin"), objects, host, node_name)
    with RecordingProxy(upstream) as proxy:
        in_cluster = {"KUBECONFIG": str(proxy.kubeconfig(host / "kubeconfig"))}
        argv, env = pod.command("config-manager-init", in_cluster)
        assert subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False).returncode == 0

        argv, env = pod.command("config-manager", {**in_cluster, "PROCESS_TO_SIGNAL": f"kg-{uuid.uuid4().hex[:8]}"})
        sidecar = start(procs, argv, env, host / "config-manager.log")
        dst = Path(env["CONFIG_FILE_DST"])
        wait_until(lambda: any(r.verb == "watch" for r in proxy.recorded()), within=30, what="the sidecar watches")
        kube.client().patch(Node, node_name, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "sliced"}}})
        wait_until(lambda: (switch.current(dst) or "").endswith("/sliced"), within=30, what="relinked")
        sidecar.terminate()
        sidecar.wait(15)
        asked = proxy.recorded()
    denied = [str(r) for r in asked if not allows(granted, r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = grants(granted) - {(r.group, r.resource, r.verb) for r in asked}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"
