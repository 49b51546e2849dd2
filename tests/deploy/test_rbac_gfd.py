"""RBAC of GPU feature discovery with ``gfd.useNodeFeatureAPI``: the rendered container, run through the recording
proxy, asks only what its Role grants and uses every rule of it (create, then update, the NodeFeature object; get
its own pod for the owner references). The proxy speaks plain HTTP to the in-process server: skips on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import helmrender
from tests.deploy.podrun import MACHINE, Pod, daemonset, start
from tests.deploy.rbac import RecordingProxy, allows, grants
from tests.deviceplugin.gfd.test_nodefeature import NODEFEATURE_CRD, NodeFeature
from tests.polling import wait_until

pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")


def test_gfd_asks_only_and_all_of_what_its_role_grants(host: Path, procs: list[Any], kube: Any) -> None:
    kube.require_server()
    kube.ensure_crd(NODEFEATURE_CRD)
    objects = helmrender.render({"gfd": {"useNodeFeatureAPI": True}}, namespace=kube.namespace)
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "kubegpu-gpu-feature-discovery")
    granted = role["rules"]
    node_name = kube.name("gpu-node")
    upstream = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    gfd = Pod(daemonset(objects, "gpu-feature-discovery"), objects, host, node_name)
    with RecordingProxy(upstream) as proxy:
        # Timestamps on and a short interval: every round changes the object, so the second round updates it.
        in_cluster = {
            "KUBECONFIG": str(proxy.kubeconfig(host / "kubeconfig", kube.namespace)),
            "KUBEGPU_MACHINE": MACHINE,
            "GFD_SLEEP_INTERVAL": "300ms",
        }
        argv, env = gfd.command("gpu-feature-discovery", in_cluster)
        assert env["NAMESPACE"] == kube.namespace and env["NODE_NAME"] == node_name
        proc = start(procs, argv, env, host / "gfd.log")

        def asked(verb: str) -> bool:
            return any(r.verb == verb and r.resource == "nodefeatures" for r in proxy.recorded())

        wait_until(lambda: asked("update"), within=60, what="the NodeFeature object created, then updated")
        proc.terminate()
        proc.wait(15)
        recorded = proxy.recorded()
    obj = kube.client().get(NodeFeature, f"nvidia-features-for-{node_name}").to_dict()
    assert obj["spec"]["labels"]["nvidia.com/gpu.count"] == "8"
    denied = [str(r) for r in recorded if not allows(granted, r)]
    assert denied == [], f"asked but not granted: {denied}"
    unused = grants(granted) - {(r.group, r.resource, r.verb) for r in recorded}
    assert unused == set(), f"granted but never asked: {sorted(unused)}"
