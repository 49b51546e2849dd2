"""The NodeFeature object GPU feature discovery publishes instead of a feature file (``--use-node-feature-api``).

Owns what the object says, as GFD writes it: the kind (``nfd.k8s-sigs.io/v1alpha1`` ``NodeFeature``), its name
(``nvidia-features-for-<node>``), its one metadata label (``nfd.node.kubernetes.io/node-name=<node>``, which
NFD's master uses to find the node; GFD replaces any other labels), its owners (the DaemonSet of the labelling
pod as controller, then the pod itself, so that deleting the DaemonSet garbage-collects the object) and its
spec (empty feature sets and the labels). Also :func:`changed`, GFD's "update only when different" rule.
Pure: the API calls are :mod:`kubegpu.deviceplugin.gfd.outputs`' job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "nfd.k8s-sigs.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NodeFeature"
PLURAL = "nodefeatures"
#: NFD's ``NodeFeatureObjNodeNameLabel``: the node an object describes.
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
#: GFD's ``nodeFeatureVendorPrefix``.
NAME_PREFIX = "nvidia-features-for"


def object_name(node: str) -> str:
    """The object's name for ``node``: ``nvidia-features-for-<node>``."""
    return f"{NAME_PREFIX}-{node}"


def owners(pod: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """GFD's owner references from the labelling pod: its DaemonSet (controller) and the pod; none when the pod
    is unknown or no DaemonSet owns it."""
    if not pod:
        return []
    meta = pod.get("metadata") or {}
    daemonset = next((ref for ref in meta.get("ownerReferences") or [] if ref.get("kind") == "DaemonSet"), None)
    if daemonset is None:
        return []
    return [
        {
            "apiVersion": daemonset.get("apiVersion", "apps/v1"),
            "kind": "DaemonSet",
            "name": daemonset.get("name", ""),
            "uid": daemonset.get("uid", ""),
            "controller": True,
        },
        {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name", ""), "uid": meta.get("uid", "")},
    ]


def spec(labels: Mapping[str, str]) -> dict[str, Any]:
    """The object's spec: NFD's empty feature sets (``NewFeatures()``) and the labels."""
    return {"features": {"flags": {}, "attributes": {}, "instances": {}}, "labels": dict(labels)}


def new_object(
    node: str, namespace: str, labels: Mapping[str, str], owner_refs: list[dict[str, Any]]
) -> dict[str, Any]:
    """The object GFD creates when there is none."""
    metadata: dict[str, Any] = {"name": object_name(node), "namespace": namespace, "labels": {NODE_NAME_LABEL: node}}
    if owner_refs:
        metadata["ownerReferences"] = owner_refs
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec(labels)}


def updated(
    existing: Mapping[str, Any], node: str, labels: Mapping[str, str], owner_refs: list[dict[str, Any]]
) -> dict[str, Any]:
    """``existing`` as GFD rewrites it: its labels replaced by the node-name label, its spec by ours, its owners
    by ours; everything else (resourceVersion included, so a stale write is refused) kept."""
    out = {**existing, "spec": spec(labels)}
    metadata = {**(existing.get("metadata") or {}), "labels": {NODE_NAME_LABEL: node}}
    if owner_refs:
        metadata["ownerReferences"] = owner_refs
    else:
        metadata.pop("ownerReferences", None)
    out["metadata"] = metadata
    return out


def changed(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` over ``existing`` changes the labels, owners or spec (GFD skips equal writes)."""
    old, new = existing.get("metadata") or {}, wanted.get("metadata") or {}
    return (
        (old.get("labels") or {}) != (new.get("labels") or {})
        or _owner_keys(old) != _owner_keys(new)
        or _spec_labels(existing) != _spec_labels(wanted)
    )


def _owner_keys(meta: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"), bool(r.get("controller")))
        for r in meta.get("ownerReferences") or []
    ]


def _spec_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("spec") or {}).get("labels") or {})
