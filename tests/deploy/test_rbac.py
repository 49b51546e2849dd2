"""RBAC is least privilege and sufficient: a component's containers, run as rendered through a recording proxy to the
API server, ask only what the chart's rules grant, and use every rule the chart grants them.

The config-manager and the scheduler here; the node agent's in ``test_rbac_node_agent.py``. The proxy speaks plain
HTTP to the in-process server, so on a real cluster these tests skip.
"""

from __future__ import annotations

import subprocess
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from kubegpu.configmanager import switch
from kubegpu.demo.localnode import free_port
from tests.deploy import helmrender
from tests.deploy.podrun import Pod, daemonset, deployment, http_get, listen_here, start
from tests.deploy.rbac import RecordingProxy, Request, allows, attributes, grants
from tests.polling import wait_until

pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")

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


def test_the_scheduler_asks_only_and_all_of_what_its_roles_grant(tmp_path: Path, procs: list[Any], kube: Any) -> None:
    """The rendered scheduler through the proxy, driven through each thing it writes: a bind (annotation patch,
    binding, event), an unschedulable pod (pods/status, an event and its repeat as the event's series), a
    preemption (pods/eviction) and a gang (podgroups list/watch, podgroups/status)."""
    from lightkube.generic_resource import create_namespaced_resource
    from lightkube.resources.scheduling_v1 import PriorityClass

    from tests.scheduling.live.cluster import CRD, add_node, create_pod, finish_deletions, node_of

    kube.require_server()
    kube.ensure_crd(yaml.safe_load(CRD.read_text()))
    pod_group = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
    objects = helmrender.render(namespace=kube.namespace)
    granted = [
        *rules(objects, "ClusterRole", "kubegpu-scheduler"),
        *rules(objects, "Role", "kubegpu-scheduler-leader-election"),
    ]
    client = kube.client()
    low, high = kube.name("low"), kube.name("high")
    for name, value in ((low, 10), (high, 1000)):
        client.create(PriorityClass.from_dict({"metadata": {"name": name}, "value": value}))
    first = add_node(kube, "one", gpus=1)
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    scheduler = Pod(deployment(objects, "scheduler"), objects, tmp_path, "")
    with RecordingProxy(upstream) as proxy:
        in_cluster = {"KUBECONFIG": str(proxy.kubeconfig(tmp_path / "kubeconfig")), "PYTHONUNBUFFERED": "1"}
        argv, env = scheduler.command("scheduler", in_cluster)
        port = free_port()
        proc = start(procs, listen_here(argv, "--metrics-listen", port), env, tmp_path / "scheduler.log")
        wait_until(lambda: http_get(port, "/readyz")[0] == 200, within=30, what="the scheduler ready")

        def bound(name: str) -> str:
            finish_deletions(client, kube.namespace)  # the kubelet's part once a victim's containers stop
            return node_of(client, kube.namespace, name)

        def asked(verb: str, resource: str) -> bool:
            return any(r.verb == verb and r.resource == resource for r in proxy.recorded())

        create_pod(kube, "victim", "gpu-scheduler", priority_class=low)
        assert wait_until(lambda: bound("victim"), within=30, what="victim bound") == first
        h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        create_pod(kube, "no-such-gpu", "gpu-scheduler", node_selector=h100)
        wait_until(lambda: asked("patch", "pods/status"), within=30, what="the pod marked unschedulable")
        create_pod(kube, "urgent", "gpu-scheduler", priority_class=high)
        assert wait_until(lambda: bound("urgent"), within=30, what="the preemptor bound") == first

        client.create(pod_group.from_dict({"metadata": {"name": "pair"}, "spec": {"minMember": 2}}))
        gang = {"scheduling.x-k8s.io/pod-group": "pair"}
        for member in ("worker-0", "worker-1"):
            create_pod(kube, member, "gpu-scheduler", labels=gang)
        second = add_node(kube, "two", gpus=2)
        for member in ("worker-0", "worker-1"):
            assert wait_until(partial(bound, member), within=30, what=f"{member} bound") == second
        wait_until(lambda: asked("patch", "podgroups/status"), within=30, what="the gang's phase written")
        # A node update retries the unschedulable pod: the same failure again is the first event's series.
        client.patch(Node, second, {"metadata": {"labels": {"kubegpu.io/touched": "1"}}})
        wait_until(lambda: asked("patch", "events"), within=30, what="the repeated failure patched onto its event")
        wait_until(lambda: asked("update", "leases"), within=30, what="the lease renewed")
        proc.terminate()
        proc.wait(15)
        asked_all = proxy.recorded()
    denied = [str(r) for r in asked_all if not allows(granted, r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = grants(granted) - {(r.group, r.resource, r.verb) for r in asked_all}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"


def test_the_exporter_asks_only_and_all_of_what_its_roles_grant(sock_dir: Path, procs: list[Any], kube: Any) -> None:
    """The rendered exporter with pod labels, pod UIDs and ``-m`` through the proxy: the ConfigMap get, the
    list/watch of its node's pods, and the get of a pod the kubelet lists but the watch does not hold."""
    import asyncio

    from lightkube.resources.core_v1 import ConfigMap
    from lightkube.resources.core_v1 import Pod as KubePod

    from kubegpu.gpu import profiles
    from tests.monitoring import exposition
    from tests.monitoring.exporter_process import scrape
    from tests.monitoring.podresources_server import ListerServer
    from tests.monitoring.podresources_server import Pod as Holder

    kube.require_server()
    values = {"exporter": {"podLabels": True, "podUID": True, "configmapData": f"{kube.namespace}:counters"}}
    objects = helmrender.render(values)
    granted = [*rules(objects, "ClusterRole", "kubegpu-exporter"), *rules(objects, "Role", "kubegpu-exporter-counters")]
    node_name, elsewhere = kube.name("gpu-node"), kube.name("other-node")
    client = kube.client()
    client.create(
        ConfigMap.from_dict(
            {"metadata": {"name": "counters"}, "data": {"metrics": "DCGM_FI_DEV_GPU_TEMP, gauge, T.\n"}}
        )
    )
    for name, node in (("here", node_name), ("moved", elsewhere)):
        spec = {"nodeName": node, "containers": [{"name": "main", "image": "x"}]}
        client.create(KubePod.from_dict({"metadata": {"name": name, "labels": {"app": name}}, "spec": spec}))
    gpus = [g.uuid for g in profiles.load("pcie-4xt4").gpus]
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    pod = Pod(daemonset(objects, "exporter"), objects, sock_dir, node_name)
    socket = sock_dir / "var" / "lib" / "kubelet" / "pod-resources" / "kubelet.sock"
    socket.parent.mkdir(parents=True)

    async def run() -> list[Request]:
        async with ListerServer(socket) as lister:
            lister.pods = [
                Holder(kube.namespace, "here", {"main": [("nvidia.com/gpu", [gpus[0]])]}),
                Holder(kube.namespace, "moved", {"main": [("nvidia.com/gpu", [gpus[1]])]}),
            ]
            with RecordingProxy(upstream) as proxy:
                argv, env = pod.command("exporter", {"KUBECONFIG": str(proxy.kubeconfig(sock_dir / "kubeconfig"))})
                port = free_port()
                argv = [*listen_here(argv, "--listen", port), "--machine", "pcie-4xt4", "--collect-interval", "200"]
                start(procs, [*argv, "--fault-file", str(sock_dir / "faults")], env, sock_dir / "exporter.log")

                def labelled() -> bool:
                    if http_get(port, "/health")[0] != 200:
                        return False
                    page = exposition.parse(scrape(f"http://127.0.0.1:{port}"))
                    return {s.labels.get("app") for s in page.named("DCGM_FI_DEV_GPU_TEMP")} >= {"here", "moved"}

                await asyncio.to_thread(wait_until, labelled, within=30, what="both pods' labels on their series")
                return proxy.recorded()

    asked = asyncio.run(run())
    denied = [str(r) for r in asked if not allows(granted, r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = grants(granted) - {(r.group, r.resource, r.verb) for r in asked}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"
