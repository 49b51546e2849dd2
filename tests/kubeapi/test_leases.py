"""coordination.k8s.io/v1 Leases: what leader election relies on (create-if-absent, optimistic renewals)."""

from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def _lease(name: str, holder: str) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=name),
        spec=LeaseSpec(
            holderIdentity=holder,
            leaseDurationSeconds=15,
            acquireTime="2026-01-01T00:00:00.000000Z",
            renewTime="2026-01-01T00:00:00.000000Z",
            leaseTransitions=0,
        ),
    )


def test_only_one_candidate_creates_the_lease(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(_lease("leader", "a"))
    with pytest.raises(ApiError) as caught:
        client.create(_lease("leader", "b"))
    assert caught.value.status.code == 409 and caught.value.status.reason == "AlreadyExists"
    assert client.get(Lease, "leader").spec.holderIdentity == "a"


def test_two_renewals_from_the_same_version_let_only_the_first_through(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(_lease("race", "a"))
    seen_by_a = client.get(Lease, "race")
    seen_by_b = client.get(Lease, "race")
    seen_by_a.spec.renewTime = "2026-01-01T00:00:02.000000Z"
    client.replace(seen_by_a)
    seen_by_b.spec.holderIdentity = "b"
    seen_by_b.spec.leaseTransitions = 1
    with pytest.raises(ApiError) as caught:
        client.replace(seen_by_b)
    assert caught.value.status.code == 409 and caught.value.status.reason == "Conflict"
    current = client.get(Lease, "race")
    assert current.spec.holderIdentity == "a" and current.spec.renewTime.second == 2


def test_microsecond_times_round_trip(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(_lease("micro", "a"))
    raw = kube.http().get(f"/apis/coordination.k8s.io/v1/namespaces/{kube.namespace}/leases/micro").json()
    assert raw["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_node_leases_live_in_kube_node_lease(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("node")
    client.create(
        Lease(
            metadata=ObjectMeta(name=name, namespace="kube-node-lease"),
            spec=LeaseSpec(holderIdentity=name, leaseDurationSeconds=40),
        )
    )
    try:
        assert client.get(Lease, name, namespace="kube-node-lease").spec.holderIdentity == name
    finally:
        client.delete(Lease, name, namespace="kube-node-lease")
