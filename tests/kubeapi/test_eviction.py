"""pods/eviction and PodDisruptionBudgets, as the eviction subresource and the disruption controller decide."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = pytest.mark.live_scheduler


def _running_pod(kube: KubeEnv, name: str, ready: bool = True, app: str = "train", **meta: Any) -> None:
    """A pod bound to a node and reported Running (Ready or not), as a kubelet would leave it."""
    client = kube.client()
    client.create(
        Pod.from_dict(
            {
                "metadata": {"name": name, "labels": {"app": app}, **meta},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            }
        )
    )
    kube.http().post(
        f"/api/v1/namespaces/{kube.namespace}/pods/{name}/binding",
        json={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": kube.name("n")},
        },
    )
    status = "True" if ready else "False"
    client.patch(
        Pod.Status,
        name,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": status}, {"type": "ContainersReady", "status": status}],
            }
        },
    )


def _pdb(kube: KubeEnv, name: str, **spec: Any) -> None:
    kube.client().create(
        PodDisruptionBudget.from_dict(
            {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "train"}}, **spec}}
        )
    )


def _allowed(kube: KubeEnv, name: str) -> int | None:
    pdb = kube.client().get(PodDisruptionBudget, name)
    return pdb.status.disruptionsAllowed if pdb.status else None


def _evict(kube: KubeEnv, name: str, **options: Any) -> Any:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": kube.namespace},
    }
    if options:
        body["deleteOptions"] = options
    return kube.http().post(f"/api/v1/namespaces/{kube.namespace}/pods/{name}/eviction", json=body)


def test_the_pdb_status_counts_healthy_pods(kube: KubeEnv) -> None:
    for i in range(3):
        _running_pod(kube, f"t{i}")
    _running_pod(kube, "unready", ready=False)
    _pdb(kube, "budget", minAvailable=2)
    wait_until(lambda: _allowed(kube, "budget") == 1, within=60, what="disruptionsAllowed 1")
    status = kube.client().get(PodDisruptionBudget, "budget").status
    assert (status.currentHealthy, status.desiredHealthy, status.expectedPods) == (3, 2, 4)


def test_an_eviction_the_budget_allows_deletes_the_pod_gracefully(kube: KubeEnv) -> None:
    for i in range(3):
        _running_pod(kube, f"ok{i}")
    _pdb(kube, "budget", minAvailable=2)
    wait_until(lambda: _allowed(kube, "budget") == 1, within=60, what="disruptionsAllowed 1")
    answer = _evict(kube, "ok0")
    assert answer.status_code == 201
    assert answer.json()["kind"] == "Status" and answer.json()["status"] == "Success"
    evicted = kube.client().get(Pod, "ok0")  # bound: stays, being deleted, until its kubelet finishes
    assert evicted.metadata.deletionTimestamp is not None
    wait_until(lambda: _allowed(kube, "budget") == 0, within=60, what="disruptionsAllowed 0")


def test_an_eviction_the_budget_forbids_is_429_with_the_real_message(kube: KubeEnv) -> None:
    for i in range(2):
        _running_pod(kube, f"no{i}")
    _pdb(kube, "strict", minAvailable=2)
    wait_until(lambda: _allowed(kube, "strict") == 0, within=60, what="disruptionsAllowed 0")
    answer = _evict(kube, "no0")
    assert answer.status_code == 429
    status = answer.json()
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert status["details"]["causes"][0]["message"] == (
        "The disruption budget strict needs 2 healthy pods and has 2 currently"
    )
    assert kube.client().get(Pod, "no0").metadata.deletionTimestamp is None


def test_lightkube_sees_a_refused_eviction_as_api_error_429(kube: KubeEnv) -> None:
    _running_pod(kube, "only")
    _pdb(kube, "one", minAvailable=1)
    wait_until(lambda: _allowed(kube, "one") == 0, within=60, what="disruptionsAllowed 0")
    with pytest.raises(ApiError) as caught:
        kube.client().create(Pod.Eviction(metadata=ObjectMeta(name="only", namespace=kube.namespace)), name="only")
    assert caught.value.status.code == 429


def test_max_unavailable_over_controlled_pods(kube: KubeEnv) -> None:
    owner = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "controller": True,
            "uid": "22222222-2222-2222-2222-222222222222",
        }
    ]
    for i in range(3):
        _running_pod(kube, f"rs{i}", ownerReferences=owner)
    _pdb(kube, "maxu", maxUnavailable=1)
    if kube.real:  # the real controller reads the owner's scale; with no such ReplicaSet it fails safe
        pytest.skip("needs a real ReplicaSet owner on a real cluster")
    wait_until(lambda: _allowed(kube, "maxu") == 1, within=60, what="disruptionsAllowed 1")
    assert _evict(kube, "rs0").status_code == 201
    assert _evict(kube, "rs1").status_code == 429


def test_max_unavailable_over_bare_pods_allows_no_disruption(kube: KubeEnv) -> None:
    for i in range(2):
        _running_pod(kube, f"bare{i}")
    _pdb(kube, "bare", maxUnavailable=1)
    wait_until(lambda: _allowed(kube, "bare") == 0, within=60, what="disruptionsAllowed 0 (fail safe)")
    assert _evict(kube, "bare0").status_code == 429


def test_a_pending_pod_is_evicted_whatever_the_budget(kube: KubeEnv) -> None:
    kube.client().create(
        Pod.from_dict(
            {
                "metadata": {"name": "pending", "labels": {"app": "train"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            }
        )
    )
    _pdb(kube, "all", minAvailable=5)
    assert _evict(kube, "pending").status_code == 201
    with pytest.raises(ApiError):
        kube.client().get(Pod, "pending")  # unbound: gone at once


def test_an_unready_pod_may_go_while_the_budget_holds(kube: KubeEnv) -> None:
    for i in range(2):
        _running_pod(kube, f"h{i}")
    _running_pod(kube, "sick", ready=False)
    _pdb(kube, "hold", minAvailable=2)
    wait_until(lambda: _allowed(kube, "hold") == 0, within=60, what="disruptionsAllowed 0")
    assert _evict(kube, "sick").status_code == 201
    assert _evict(kube, "h0").status_code == 429


def test_eviction_delete_options_set_the_grace_period(kube: KubeEnv) -> None:
    _running_pod(kube, "quick")
    assert _evict(kube, "quick", gracePeriodSeconds=3).status_code == 201
    assert kube.client().get(Pod, "quick").metadata.deletionGracePeriodSeconds == 3


def test_evicting_a_missing_pod_is_404(kube: KubeEnv) -> None:
    assert _evict(kube, "nobody").status_code == 404
