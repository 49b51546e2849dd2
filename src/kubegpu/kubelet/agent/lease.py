"""The node's heartbeat Lease (``coordination.k8s.io/v1`` in ``kube-node-lease``), as the kubelet writes it.

Owns the shape of the Lease: named after the node, ``holderIdentity`` the node
name, ``leaseDurationSeconds`` (40 by default), ``renewTime`` as MicroTime, and
an owner reference to the Node so that deleting the Node deletes its Lease.
Renewing changes ``renewTime`` only and keeps ``resourceVersion``, so the
update is refused (409) when someone else changed the Lease meanwhile. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from kubegpu.kubelet.agent.config import NODE_LEASE_NAMESPACE
from kubegpu.kubelet.agent.nodeobject import micro_time


def lease_manifest(node_name: str, node_uid: str | None, duration: int, now: float) -> dict[str, object]:
    meta: dict[str, object] = {"name": node_name, "namespace": NODE_LEASE_NAMESPACE}
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": node_name, "leaseDurationSeconds": duration, "renewTime": micro_time(now)},
    }


def renewed(
    lease: Mapping[str, object], node_name: str, node_uid: str | None, duration: int, now: float
) -> dict[str, object]:
    """``lease`` (as read, resourceVersion included) with a new ``renewTime`` and our holder and duration."""
    out: dict[str, object] = copy.deepcopy(dict(lease))
    spec = out.get("spec")
    spec = dict(spec) if isinstance(spec, Mapping) else {}
    spec.update(holderIdentity=node_name, leaseDurationSeconds=duration, renewTime=micro_time(now))
    out["spec"] = spec
    meta = out.get("metadata")
    if isinstance(meta, dict) and node_uid and not meta.get("ownerReferences"):
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    out.setdefault("apiVersion", "coordination.k8s.io/v1")
    out.setdefault("kind", "Lease")
    return out
