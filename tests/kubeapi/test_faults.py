"""The in-process server's fault hooks: injected 429/500 answers for the next N matching requests."""

from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Pod

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def test_the_next_n_matching_requests_fail_then_requests_succeed(kube: KubeEnv) -> None:
    server = kube.require_server()
    client = kube.client()
    client.create(ConfigMap(metadata=ObjectMeta(name="f")))
    server.fail_next(2, status=500, resource="configmaps", verb="get")
    for _ in range(2):
        with pytest.raises(ApiError) as caught:
            client.get(ConfigMap, "f")
        assert caught.value.status.code == 500 and caught.value.status.reason == "InternalError"
    assert client.get(ConfigMap, "f").metadata.name == "f"


def test_a_429_fault_carries_retry_after(kube: KubeEnv) -> None:
    server = kube.require_server()
    server.fail_next(1, status=429, resource="pods/binding")
    answer = kube.http().post(
        f"/api/v1/namespaces/{kube.namespace}/pods/x/binding",
        json={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "x"},
            "target": {"kind": "Node", "name": "n"},
        },
    )
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["reason"] == "TooManyRequests"


def test_faults_only_hit_the_resource_and_verb_they_name(kube: KubeEnv) -> None:
    server = kube.require_server()
    client = kube.client()
    server.fail_next(1, status=500, resource="pods", verb="create")
    client.create(ConfigMap(metadata=ObjectMeta(name="spared")))
    list(client.list(Pod))
    with pytest.raises(ApiError):
        client.create(
            Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
        )


def test_a_bad_fault_status_is_refused(kube: KubeEnv) -> None:
    server = kube.require_server()
    with pytest.raises(ValueError, match="429 or 500"):
        server.fail_next(1, status=404)
