"""Create, get, list, update and delete as the real server answers them: codes, reasons, resourceVersions."""

from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def _pod(name: str, **spec: object) -> Pod:
    return Pod.from_dict(
        {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}], **spec}}
    )


def test_create_then_get_returns_the_stored_object(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="one"), data={"a": "1"}))
    assert created.metadata.uid and created.metadata.creationTimestamp and created.metadata.resourceVersion
    got = client.get(ConfigMap, "one")
    assert got.data == {"a": "1"}
    assert got.metadata.resourceVersion == created.metadata.resourceVersion


def test_get_of_a_missing_object_is_404_not_found(kube: KubeEnv) -> None:
    with pytest.raises(ApiError) as caught:
        kube.client().get(ConfigMap, "missing")
    assert caught.value.status.code == 404
    assert caught.value.status.reason == "NotFound"
    assert caught.value.status.message == 'configmaps "missing" not found'


def test_create_of_an_existing_name_is_409_already_exists(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="dup")))
    with pytest.raises(ApiError) as caught:
        client.create(ConfigMap(metadata=ObjectMeta(name="dup")))
    assert caught.value.status.code == 409
    assert caught.value.status.reason == "AlreadyExists"
    assert caught.value.status.message == 'configmaps "dup" already exists'


def test_generate_name_gets_a_unique_suffix(kube: KubeEnv) -> None:
    client = kube.client()
    names = {client.create(ConfigMap(metadata=ObjectMeta(generateName="gen-"))).metadata.name for _ in range(3)}
    assert len(names) == 3
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)


def test_objects_in_a_missing_namespace_are_404(kube: KubeEnv) -> None:
    with pytest.raises(ApiError) as caught:
        kube.client().create(ConfigMap(metadata=ObjectMeta(name="x", namespace=kube.name("absent"))))
    assert caught.value.status.code == 404
    assert caught.value.status.message == f'namespaces "{kube.name("absent")}" not found'


def test_an_invalid_name_is_422_invalid(kube: KubeEnv) -> None:
    with pytest.raises(ApiError) as caught:
        kube.client().create(ConfigMap(metadata=ObjectMeta(name="Bad_Name")))
    assert caught.value.status.code == 422
    assert caught.value.status.reason == "Invalid"
    assert 'metadata.name: Invalid value: "Bad_Name"' in caught.value.status.message


def test_list_returns_the_collection_resource_version_and_every_write_bumps_it(kube: KubeEnv) -> None:
    client = kube.client()
    before = client.list(ConfigMap)
    list(before)
    created = client.create(ConfigMap(metadata=ObjectMeta(name="rv")))
    after = client.list(ConfigMap)
    names = [c.metadata.name for c in after]
    assert "rv" in names
    assert int(after.resourceVersion) >= int(created.metadata.resourceVersion) > int(before.resourceVersion)


def test_resource_versions_are_global_across_kinds(kube: KubeEnv) -> None:
    client = kube.client()
    first = client.create(ConfigMap(metadata=ObjectMeta(name="a")))
    ns = client.create(Namespace(metadata=ObjectMeta(name=kube.name("other"))))
    second = client.create(ConfigMap(metadata=ObjectMeta(name="b")))
    assert int(first.metadata.resourceVersion) < int(ns.metadata.resourceVersion) < int(second.metadata.resourceVersion)


def test_list_pages_with_limit_and_continue(kube: KubeEnv) -> None:
    client = kube.client()
    for i in range(5):
        client.create(ConfigMap(metadata=ObjectMeta(name=f"page-{i}")))
    names = [c.metadata.name for c in client.list(ConfigMap, chunk_size=2) if c.metadata.name.startswith("page-")]
    assert names == [f"page-{i}" for i in range(5)]
    first = kube.http().get(f"/api/v1/namespaces/{kube.namespace}/configmaps", params={"limit": "2"}).json()
    assert len(first["items"]) == 2 and first["metadata"]["continue"]


def test_update_with_a_stale_resource_version_is_409_conflict(kube: KubeEnv) -> None:
    client = kube.client()
    original = client.create(ConfigMap(metadata=ObjectMeta(name="occ"), data={"v": "0"}))
    fresh = client.get(ConfigMap, "occ")
    fresh.data = {"v": "1"}
    client.replace(fresh)
    original.data = {"v": "stale"}
    with pytest.raises(ApiError) as caught:
        client.replace(original)
    assert caught.value.status.code == 409
    assert caught.value.status.reason == "Conflict"
    assert caught.value.status.message == (
        'Operation cannot be fulfilled on configmaps "occ": the object has been modified; please apply your changes '
        "to the latest version and try again"
    )
    assert client.get(ConfigMap, "occ").data == {"v": "1"}


def test_update_without_a_resource_version_is_unconditional(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="uncond"), data={"v": "0"}))
    updated = client.replace(ConfigMap(metadata=ObjectMeta(name="uncond"), data={"v": "2"}))
    assert updated.data == {"v": "2"}


def test_update_keeps_uid_and_creation_timestamp(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="keep")))
    updated = client.replace(ConfigMap(metadata=ObjectMeta(name="keep"), data={"x": "y"}))
    assert updated.metadata.uid == created.metadata.uid
    assert updated.metadata.creationTimestamp == created.metadata.creationTimestamp


def test_an_update_that_changes_the_uid_is_422(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="uid")))
    with pytest.raises(ApiError) as caught:
        client.replace(ConfigMap(metadata=ObjectMeta(name="uid", uid="6a5f3c2e-0000-4000-8000-000000000000")))
    assert caught.value.status.code == 422
    assert "metadata.uid" in caught.value.status.message and "field is immutable" in caught.value.status.message


def test_update_of_a_missing_object_is_404(kube: KubeEnv) -> None:
    with pytest.raises(ApiError) as caught:
        kube.client().replace(ConfigMap(metadata=ObjectMeta(name="nothere")))
    assert caught.value.status.code == 404


def test_delete_removes_and_a_second_delete_is_404(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="gone")))
    client.delete(ConfigMap, "gone")
    with pytest.raises(ApiError) as caught:
        client.delete(ConfigMap, "gone")
    assert caught.value.status.code == 404


def test_delete_with_a_failed_precondition_is_409_and_keeps_the_object(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="pre")))
    path = f"/api/v1/namespaces/{kube.namespace}/configmaps/pre"
    http = kube.http()
    wrong = http.request(
        "DELETE",
        path,
        json={
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"},
        },
    )
    assert wrong.status_code == 409 and wrong.json()["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition" in wrong.json()["message"]
    stale = http.request(
        "DELETE", path, json={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}}
    )
    assert stale.status_code == 409
    assert client.get(ConfigMap, "pre").metadata.uid == created.metadata.uid
    right = http.request(
        "DELETE",
        path,
        json={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": created.metadata.uid}},
    )
    assert right.status_code == 200


def test_delete_collection_removes_what_the_selector_matches(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="del-a", labels={"batch": "x"})))
    client.create(ConfigMap(metadata=ObjectMeta(name="keep-b", labels={"batch": "y"})))
    answer = kube.http().delete(f"/api/v1/namespaces/{kube.namespace}/configmaps", params={"labelSelector": "batch=x"})
    assert answer.status_code == 200
    names = {c.metadata.name for c in client.list(ConfigMap)}
    assert "keep-b" in names and "del-a" not in names


def test_a_namespace_deletion_removes_its_objects(kube: KubeEnv) -> None:
    server = kube.require_server()  # a real namespace controller finishes this asynchronously
    client = kube.client()
    other = kube.name("doomed")
    client.create(Namespace(metadata=ObjectMeta(name=other)))
    client.create(ConfigMap(metadata=ObjectMeta(name="inside", namespace=other)))
    client.delete(Namespace, other)
    with pytest.raises(ApiError):
        client.get(ConfigMap, "inside", namespace=other)
    assert server.resource_version > 0


def test_dry_run_validates_but_does_not_store(kube: KubeEnv) -> None:
    http = kube.http()
    answer = http.post(
        f"/api/v1/namespaces/{kube.namespace}/configmaps",
        params={"dryRun": "All"},
        json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}},
    )
    assert answer.status_code == 201
    with pytest.raises(ApiError):
        kube.client().get(ConfigMap, "dry")


def test_bad_json_is_400_bad_request(kube: KubeEnv) -> None:
    answer = kube.http().post(
        f"/api/v1/namespaces/{kube.namespace}/configmaps",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["kind"] == "Status"


def test_server_side_apply_creates_then_updates(kube: KubeEnv) -> None:
    client = kube.client(field_manager="kubegpu-test")
    applied = client.apply(ConfigMap(metadata=ObjectMeta(name="ssa"), data={"a": "1"}))
    assert applied.data == {"a": "1"}
    again = client.apply(ConfigMap(metadata=ObjectMeta(name="ssa"), data={"a": "2"}))
    assert again.data == {"a": "2"}
    assert again.metadata.uid == applied.metadata.uid


def test_closing_the_shared_client_is_harmless(kube: KubeEnv) -> None:
    kube.client().close()
    kube.client().create(ConfigMap(metadata=ObjectMeta(name="after-close")))
    assert kube.client().get(ConfigMap, "after-close").metadata.name == "after-close"


def test_creating_an_object_that_carries_a_resource_version_is_refused(kube: KubeEnv) -> None:
    client = kube.client()
    fetched = client.create(ConfigMap(metadata=ObjectMeta(name="orig")))
    copy = ConfigMap(metadata=ObjectMeta(name="copy", resourceVersion=fetched.metadata.resourceVersion))
    with pytest.raises(ApiError) as caught:
        client.create(copy)
    assert caught.value.status.code == 500
    assert caught.value.status.message == "resourceVersion should not be set on objects to be created"
