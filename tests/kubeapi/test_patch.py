"""PATCH in its three formats, as lightkube sends them, and status subresource rules on patches."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from lightkube.types import PatchType

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def _pod(kube: KubeEnv, name: str) -> Pod:
    return kube.client().create(
        Pod.from_dict(
            {
                "metadata": {"name": name, "labels": {"keep": "1", "drop": "1"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            }
        )
    )


def _conditions(obj: Any) -> dict[str, str]:
    return {c.type: c.status for c in obj.status.conditions or []}


def test_merge_patch_merges_maps_and_null_deletes(kube: KubeEnv) -> None:
    client = kube.client()
    _pod(kube, "merge")
    patched = client.patch(
        Pod, "merge", {"metadata": {"labels": {"new": "2", "drop": None}}}, patch_type=PatchType.MERGE
    )
    assert patched.metadata.labels == {"keep": "1", "new": "2"}


def test_strategic_merge_patch_merges_status_conditions_by_type(kube: KubeEnv) -> None:
    client = kube.client()
    _pod(kube, "smp")
    client.patch(Pod.Status, "smp", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    patched = client.patch(
        Pod.Status,
        "smp",
        {
            "status": {
                "conditions": [{"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}]
            }
        },
    )
    assert _conditions(patched) == {"Ready": "True", "ContainersReady": "True"}


def test_merge_patch_replaces_a_list_of_conditions_whole(kube: KubeEnv) -> None:
    client = kube.client()
    _pod(kube, "mergelist")
    client.patch(Pod.Status, "mergelist", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    patched = client.patch(
        Pod.Status,
        "mergelist",
        {"status": {"conditions": [{"type": "ContainersReady", "status": "True"}]}},
        patch_type=PatchType.MERGE,
    )
    assert _conditions(patched) == {"ContainersReady": "True"}


def test_strategic_merge_patch_replaces_node_taints_which_have_no_merge_key(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("taints")
    client.create(
        Node.from_dict(
            {
                "metadata": {"name": name},
                "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]},
            }
        )
    )
    current = client.get(Node, name).spec.taints
    wanted = [t.to_dict() for t in current if t.key != "a"] + [{"key": "c", "effect": "NoExecute"}]
    patched = client.patch(Node, name, {"spec": {"taints": wanted}})
    keys = {t.key for t in patched.spec.taints}
    assert "a" not in keys and {"b", "c"} <= keys


def test_strategic_merge_patch_delete_directive_removes_one_condition(kube: KubeEnv) -> None:
    client = kube.client()
    _pod(kube, "directive")
    client.patch(
        Pod.Status,
        "directive",
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "False"}]
            }
        },
    )
    patched = client.patch(Pod.Status, "directive", {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}})
    assert _conditions(patched) == {"ContainersReady": "False"}


def test_json_patch_adds_replaces_and_removes(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="jp"), data={"a": "1", "b": "2"}))
    patched = client.patch(
        ConfigMap,
        "jp",
        [
            {"op": "add", "path": "/data/c", "value": "3"},
            {"op": "replace", "path": "/data/a", "value": "10"},
            {"op": "remove", "path": "/data/b"},
            {"op": "add", "path": "/metadata/annotations", "value": {"kubegpu.io/gpu-devices": "GPU-1,GPU-2"}},
        ],
        patch_type=PatchType.JSON,
    )
    assert patched.data == {"a": "10", "c": "3"}
    assert patched.metadata.annotations == {"kubegpu.io/gpu-devices": "GPU-1,GPU-2"}


def test_a_failed_json_patch_test_operation_changes_nothing(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="jpt"), data={"a": "1"}))
    with pytest.raises(ApiError) as caught:
        client.patch(
            ConfigMap,
            "jpt",
            [{"op": "test", "path": "/data/a", "value": "2"}, {"op": "replace", "path": "/data/a", "value": "3"}],
            patch_type=PatchType.JSON,
        )
    assert caught.value.status.code == 422
    assert client.get(ConfigMap, "jpt").data == {"a": "1"}


def test_a_patch_naming_a_stale_resource_version_is_409(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="prv"), data={"a": "1"}))
    client.patch(ConfigMap, "prv", {"data": {"a": "2"}})
    with pytest.raises(ApiError) as caught:
        client.patch(
            ConfigMap,
            "prv",
            {"metadata": {"resourceVersion": created.metadata.resourceVersion}, "data": {"a": "3"}},
            patch_type=PatchType.MERGE,
        )
    assert caught.value.status.code == 409 and caught.value.status.reason == "Conflict"


def test_a_patch_without_a_resource_version_always_applies(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="free"), data={"a": "1"}))
    client.patch(ConfigMap, "free", {"data": {"a": "2"}})
    assert client.patch(ConfigMap, "free", {"data": {"a": "3"}}).data == {"a": "3"}


def test_a_main_resource_patch_ignores_status_and_a_status_patch_ignores_spec(kube: KubeEnv) -> None:
    client = kube.client()
    _pod(kube, "split")
    main = client.patch(Pod, "split", {"metadata": {"annotations": {"x": "y"}}, "status": {"phase": "Running"}})
    assert main.status.phase == "Pending" and main.metadata.annotations == {"x": "y"}
    status = client.patch(Pod.Status, "split", {"spec": {"activeDeadlineSeconds": 5}, "status": {"phase": "Running"}})
    assert status.status.phase == "Running" and status.spec.activeDeadlineSeconds is None


def test_a_status_update_with_put_keeps_spec_and_owner_references(kube: KubeEnv) -> None:
    client = kube.client()
    pod = _pod(kube, "put")
    pod.status.phase = "Running"
    pod.spec.activeDeadlineSeconds = 99
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "11111111-1111-1111-1111-111111111111"}
    replaced = client.replace(
        Pod.Status.from_dict(
            {
                **pod.to_dict(),
                "metadata": {**pod.metadata.to_dict(), "ownerReferences": [owner], "labels": {"set": "by-status"}},
            }
        )
    )
    assert replaced.status.phase == "Running"
    assert replaced.spec.activeDeadlineSeconds is None
    assert not replaced.metadata.ownerReferences
    assert replaced.metadata.labels == {"set": "by-status"}  # pods/status may change metadata, as the real one


def test_a_no_op_patch_keeps_the_resource_version(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="noop"), data={"a": "1"}))
    same = client.patch(ConfigMap, "noop", {"data": {"a": "1"}})
    assert same.metadata.resourceVersion == created.metadata.resourceVersion


def test_patching_a_missing_object_is_404(kube: KubeEnv) -> None:
    with pytest.raises(ApiError) as caught:
        kube.client().patch(ConfigMap, "absent", {"data": {"a": "1"}})
    assert caught.value.status.code == 404


def test_an_unknown_patch_content_type_is_415(kube: KubeEnv) -> None:
    kube.client().create(ConfigMap(metadata=ObjectMeta(name="ct")))
    answer = kube.http().patch(
        f"/api/v1/namespaces/{kube.namespace}/configmaps/ct", content=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert answer.status_code == 415 and answer.json()["reason"] == "UnsupportedMediaType"
