"""``kubegpu labels --use-node-feature-api`` (GFD's default): the NodeFeature object, written through a real API.

Runs ``kubegpu labels`` as a separate process against the ``kube`` fixture's API server (in-process, or the
cluster ``KUBEGPU_TEST_KUBECONFIG`` names) with NFD's NodeFeature CRD installed, and reads the object back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import Pod

from kubegpu.deviceplugin.gfd import nodefeature
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

NodeFeature = create_namespaced_resource("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature", "nodefeatures")

#: NFD's NodeFeature CRD, reduced to the fields GFD writes (NFD's own schema has the same shape).
NODEFEATURE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodefeatures.nfd.k8s-sigs.io"},
    "spec": {
        "group": "nfd.k8s-sigs.io",
        "scope": "Namespaced",
        "names": {
            "plural": "nodefeatures",
            "singular": "nodefeature",
            "kind": "NodeFeature",
            "listKind": "NodeFeatureList",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "features": {
                                        "type": "object",
                                        "properties": {
                                            kind: {
                                                "type": "object",
                                                "additionalProperties": {
                                                    "type": "object",
                                                    "x-kubernetes-preserve-unknown-fields": True,
                                                },
                                            }
                                            for kind in ("attributes", "flags", "instances")
                                        },
                                    },
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


# --- the object, pure ------------------------------------------------------------------------


def test_the_object_is_named_after_the_node_as_gfd_names_it() -> None:
    body = nodefeature.new_object("gpu-7", "gpu-operator", {"nvidia.com/gpu.count": "8"}, [])
    assert body["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1"
    assert body["kind"] == "NodeFeature"
    assert body["metadata"] == {
        "name": "nvidia-features-for-gpu-7",
        "namespace": "gpu-operator",
        "labels": {"nfd.node.kubernetes.io/node-name": "gpu-7"},
    }
    assert body["spec"] == {
        "features": {"flags": {}, "attributes": {}, "instances": {}},
        "labels": {"nvidia.com/gpu.count": "8"},
    }


def test_owners_are_the_pods_daemonset_as_controller_then_the_pod() -> None:
    pod = {
        "metadata": {
            "name": "gfd-x1",
            "uid": "pod-uid",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "node-uid"},
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gfd", "uid": "ds-uid", "controller": True},
            ],
        }
    }
    assert nodefeature.owners(pod) == [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gfd", "uid": "ds-uid", "controller": True},
        {"apiVersion": "v1", "kind": "Pod", "name": "gfd-x1", "uid": "pod-uid"},
    ]


@pytest.mark.parametrize(
    "pod",
    [None, {"metadata": {"name": "p", "uid": "u"}}, {"metadata": {"ownerReferences": [{"kind": "ReplicaSet"}]}}],
    ids=["no_pod", "no_owners", "not_a_daemonset"],
)
def test_no_owners_without_a_daemonset(pod: dict[str, Any] | None) -> None:
    assert nodefeature.owners(pod) == []


def test_an_update_replaces_labels_spec_and_owners_and_keeps_the_resource_version() -> None:
    existing = {
        "metadata": {"name": "nvidia-features-for-n", "resourceVersion": "41", "labels": {"team": "x"}},
        "spec": {"labels": {"nvidia.com/gpu.count": "4"}},
    }
    wanted = nodefeature.updated(existing, "n", {"nvidia.com/gpu.count": "8"}, [])
    assert wanted["metadata"] == {
        "name": "nvidia-features-for-n",
        "resourceVersion": "41",
        "labels": {"nfd.node.kubernetes.io/node-name": "n"},
    }
    assert nodefeature.changed(existing, wanted)
    assert not nodefeature.changed(wanted, nodefeature.updated(wanted, "n", {"nvidia.com/gpu.count": "8"}, []))


# --- the command against an API server --------------------------------------------------------


def labels_cmd(kube: KubeEnv, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--no-timestamp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig), "NAMESPACE": kube.namespace, **env},
        check=False,
    )


def feature_file_labels(kube: KubeEnv) -> dict[str, str]:
    done = labels_cmd(kube, "--oneshot", "--use-node-feature-api=false", "-o", "-")
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


def read(kube: KubeEnv, node: str) -> dict[str, Any]:
    obj: dict[str, Any] = kube.client().get(NodeFeature, f"nvidia-features-for-{node}").to_dict()
    return obj


def test_oneshot_creates_the_node_feature_object_by_default(kube: KubeEnv) -> None:
    kube.ensure_crd(NODEFEATURE_CRD)
    node = kube.name("gpu-node")
    done = labels_cmd(kube, "--oneshot", NODE_NAME=node)
    assert done.returncode == 0, done.stderr
    obj = read(kube, node)
    assert obj["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": node}
    assert "ownerReferences" not in obj["metadata"]
    assert obj["spec"]["labels"] == feature_file_labels(kube)
    assert obj["spec"]["labels"]["nvidia.com/gpu.count"] == "8"


def test_a_second_run_updates_only_what_changed_and_sets_the_owners(kube: KubeEnv) -> None:
    kube.ensure_crd(NODEFEATURE_CRD)
    node = kube.name("gpu-node")
    client = kube.client()
    stale = nodefeature.new_object(node, kube.namespace, {"nvidia.com/gpu.count": "1"}, [])
    stale["metadata"]["labels"]["team"] = "someone-else"
    client.create(NodeFeature.from_dict(stale))
    owner_uids = _daemonset_and_pod(kube, "gfd-pod")

    done = labels_cmd(kube, "--oneshot", "--node-name", node, "--pod-name", "gfd-pod")
    assert done.returncode == 0, done.stderr
    obj = read(kube, node)
    assert obj["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": node}
    assert obj["spec"]["labels"] == feature_file_labels(kube)
    refs = obj["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [
        ("DaemonSet", "gfd", owner_uids[0], True),
        ("Pod", "gfd-pod", owner_uids[1], None),
    ]

    version = obj["metadata"]["resourceVersion"]
    done = labels_cmd(kube, "--oneshot", "--node-name", node, "--pod-name", "gfd-pod")
    assert done.returncode == 0, done.stderr
    assert read(kube, node)["metadata"]["resourceVersion"] == version  # nothing changed: nothing written


def _daemonset_and_pod(kube: KubeEnv, pod_name: str) -> tuple[str, str]:
    """A DaemonSet that runs nowhere and a pod that names it as an owner (not as controller, so neither the
    DaemonSet controller nor the garbage collector of a real cluster touches it); their UIDs."""
    client = kube.client()
    labels = {"app": "gfd-test"}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {"kubegpu.io/no-such-node": "true"},
            "containers": [{"name": "gfd", "image": "registry.invalid/gfd:none"}],
        },
    }
    ds = client.create(
        DaemonSet.from_dict(
            {"metadata": {"name": "gfd"}, "spec": {"selector": {"matchLabels": labels}, "template": template}}
        )
    )
    assert ds.metadata is not None and ds.metadata.uid
    pod = client.create(
        Pod.from_dict(
            {
                "metadata": {
                    "name": pod_name,
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gfd", "uid": ds.metadata.uid}
                    ],
                },
                "spec": template["spec"],
            }
        )
    )
    assert pod.metadata is not None and pod.metadata.uid
    return ds.metadata.uid, pod.metadata.uid


def test_a_stale_update_of_a_node_feature_is_refused_with_409(kube: KubeEnv) -> None:
    kube.ensure_crd(NODEFEATURE_CRD)
    client = kube.client()
    node = kube.name("gpu-node")
    created = client.create(NodeFeature.from_dict(nodefeature.new_object(node, kube.namespace, {"a/b": "1"}, [])))
    first = created.to_dict()
    client.replace(NodeFeature.from_dict(nodefeature.updated(first, node, {"a/b": "2"}, [])))
    with pytest.raises(ApiError) as refused:
        client.replace(NodeFeature.from_dict(nodefeature.updated(first, node, {"a/b": "3"}, [])))
    assert refused.value.status.code == 409
    assert read(kube, node)["spec"]["labels"] == {"a/b": "2"}


def test_the_loop_relabels_and_keeps_the_object_on_sigterm(kube: KubeEnv) -> None:
    kube.ensure_crd(NODEFEATURE_CRD)
    node = kube.name("gpu-node")
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "NAMESPACE": kube.namespace, "NODE_NAME": node}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--sleep-interval", "200ms"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        first = wait_until(lambda: _timestamp(kube, node), within=60, what="the NodeFeature object written")
        wait_until(lambda: (_timestamp(kube, node) or first) != first, within=60, what="a second labelling")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert read(kube, node)["spec"]["labels"]["nvidia.com/gpu.count"] == "8"
    finally:
        proc.kill()
        proc.wait()


def test_the_loop_outlives_a_failed_write_and_writes_once_it_can(kube: KubeEnv, tmp_path: Path) -> None:
    """The object's namespace does not exist yet: every write is refused (404) and the loop keeps going; once the
    namespace is there, the next round creates the object."""
    from lightkube.resources.core_v1 import Namespace

    kube.ensure_crd(NODEFEATURE_CRD)
    node, namespace = kube.name("gpu-node"), kube.name("later")
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "NAMESPACE": namespace, "NODE_NAME": node}
    log = tmp_path / "labels.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--sleep-interval", "200ms"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        client = kube.client()

        def written() -> bool:
            try:
                client.get(NodeFeature, f"nvidia-features-for-{node}", namespace=namespace)
            except ApiError:
                return False
            return True

        # A round has failed (the command logs it) while the process keeps running.
        wait_until(lambda: "labels not written" in log.read_text(), within=60, what="a failed write logged")
        assert f"does namespace {namespace} exist?" in log.read_text()
        assert proc.poll() is None
        client.create(Namespace.from_dict({"metadata": {"name": namespace}}))
        wait_until(written, within=60, what="the NodeFeature object written once the namespace exists")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()


def _timestamp(kube: KubeEnv, node: str) -> str | None:
    """The object's resourceVersion (it changes with every write), None before the first."""
    try:
        return str(read(kube, node)["metadata"]["resourceVersion"])
    except ApiError:
        return None


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {}, "required flag node-name not set"),
        (["--namespace", ""], {"NODE_NAME": "n"}, "required flag namespace not set"),
        (
            ["--device-discovery-strategy", "cuda"],
            {"NODE_NAME": "n"},
            "invalid --device-discovery-strategy option cuda",
        ),
        (["--device-discovery-strategy", "vfio"], {"NODE_NAME": "n"}, "vfio is not supported"),
        (["--kube-api-qps", "fast"], {"NODE_NAME": "n"}, "invalid --kube-api-qps option 'fast'"),
        (["--kube-api-burst", "0"], {"NODE_NAME": "n"}, "invalid --kube-api-burst option '0'"),
        (["--use-node-feature-api", "maybe"], {}, "--use-node-feature-api"),
    ],
    ids=["no_node_name", "empty_namespace", "unknown_discovery", "vfio", "bad_qps", "zero_burst", "bad_bool"],
)
def test_bad_gfd_flags_are_one_line_and_exit_2(args: list[str], env: dict[str, str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--oneshot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "NAMESPACE")} | env,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_api_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "labels", "--machine", "dgx-a100", "--oneshot", "--node-name", "n"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "cannot write NodeFeature default/nvidia-features-for-n" in done.stderr
    assert "Traceback" not in done.stderr
