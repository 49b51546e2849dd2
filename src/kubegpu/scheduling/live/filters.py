"""The node filters a real pod needs besides resources, with kube-scheduler's reason texts.

Owns, in kube-scheduler's plugin order, ``NodeUnschedulable`` (``spec.unschedulable``
unless tolerated), ``NodeName``, ``TaintToleration`` (NoSchedule/NoExecute taints
the pod does not tolerate), ``NodeAffinity`` (``nodeSelector`` and required node
affinity, which is also how a pod asks for a GPU model through the
``nvidia.com/gpu.product`` label) and the reason strings each writes into
``FailedScheduling`` ("node(s) didn't match Pod's node affinity/selector", ...). A
node fails on the first filter that rejects it, as in kube-scheduler. Must not
look at resources (that is :mod:`cache`) and does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubegpu.scheduling.live.objects import NO_EXECUTE, NO_SCHEDULE, NodeInfo, PodInfo, Requirement, Taint, Term

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"

#: Filters kube-scheduler users name in profiles that this scheduler runs (resources are NodeResourcesFit).
STATIC_FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity")


def _unschedulable(pod: PodInfo, node: NodeInfo) -> str | None:
    if node.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
        return REASON_UNSCHEDULABLE
    return None


def _node_name(pod: PodInfo, node: NodeInfo) -> str | None:
    # Only reached for pods without spec.nodeName (those are not scheduled); kept for the plugin table.
    return None


def _taints(pod: PodInfo, node: NodeInfo) -> str | None:
    for taint in node.taints:
        if taint.effect not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    return None


def _match(req: Requirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Term, labels: Mapping[str, str], name: str) -> bool:
    """A node-selector term matches when all of its requirements do; an empty term matches nothing."""
    if not term.expressions and not term.fields:
        return False
    if not all(_match(r, labels.get(r.key)) for r in term.expressions):
        return False
    return all(_match(r, name if r.key == "metadata.name" else None) for r in term.fields)


def _affinity(pod: PodInfo, node: NodeInfo) -> str | None:
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return REASON_AFFINITY
    if pod.affinity is not None and not any(term_matches(t, node.labels, node.name) for t in pod.affinity):
        return REASON_AFFINITY
    return None


FILTERS: dict[str, Callable[[PodInfo, NodeInfo], str | None]] = {
    "NodeUnschedulable": _unschedulable,
    "NodeName": _node_name,
    "TaintToleration": _taints,
    "NodeAffinity": _affinity,
}


def static_reason(pod: PodInfo, node: NodeInfo, enabled: tuple[str, ...] = STATIC_FILTERS) -> str | None:
    """Why ``node`` can never take ``pod`` whatever is running there, or None when it can."""
    for name in enabled:
        reason = FILTERS[name](pod, node)
        if reason is not None:
            return reason
    return None


def constraint_key(pod: PodInfo) -> tuple[object, ...]:
    """Pods with equal keys pass the same static filters on the same nodes (the filter cache's key)."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations)
