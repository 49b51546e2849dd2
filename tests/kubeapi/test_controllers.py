"""The control-plane rules the server applies, as tables (pure: no server): the disruption controller's budget
arithmetic and the node lifecycle controller's taints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubeapi import admission, disruption


def _pod(name: str, ready: bool = True, deleting: bool = False, owned: bool = False, app: str = "a") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"app": app}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owned:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
    return {
        "metadata": meta,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _pdb(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": "ns", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "pods", "expected"),
    [
        ({"minAvailable": 2}, [_pod("1"), _pod("2"), _pod("3")], (3, 2, 3, 1)),
        ({"minAvailable": 3}, [_pod("1"), _pod("2"), _pod("3")], (3, 3, 3, 0)),
        ({"minAvailable": 2}, [_pod("1"), _pod("2", ready=False), _pod("3", deleting=True)], (1, 2, 3, 0)),
        ({"minAvailable": "50%"}, [_pod(str(i), owned=True) for i in range(3)], (3, 2, 3, 1)),  # ceil(1.5) = 2
        ({"maxUnavailable": 1}, [_pod(str(i), owned=True) for i in range(4)], (4, 3, 4, 1)),
        ({"maxUnavailable": "25%"}, [_pod(str(i), owned=True) for i in range(5)], (5, 3, 5, 2)),  # ceil(1.25) = 2
        ({"maxUnavailable": 1}, [_pod("1"), _pod("2")], (2, 0, 0, 0)),  # bare pods: fail safe
        ({"minAvailable": 1}, [_pod("1", app="other")], (0, 1, 0, 0)),
    ],
    ids=[
        "min-int",
        "min-all",
        "unready-and-deleting",
        "min-percent",
        "max-int",
        "max-percent",
        "max-bare",
        "unselected",
    ],
)
def test_budget_arithmetic(spec: dict[str, Any], pods: list[dict[str, Any]], expected: tuple[int, ...]) -> None:
    budget = disruption.compute(_pdb(**spec), pods)
    assert (
        budget.current_healthy,
        budget.desired_healthy,
        budget.expected_pods,
        budget.disruptions_allowed,
    ) == expected


def test_an_empty_selector_selects_every_pod_and_a_missing_one_none() -> None:
    everyone = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {}}}
    nobody = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}}
    assert disruption.selects(everyone, _pod("x", app="z"))
    assert not disruption.selects(nobody, _pod("x"))
    assert not disruption.selects(everyone, {**_pod("x"), "metadata": {"name": "x", "namespace": "other"}})


@pytest.mark.parametrize(
    ("policy", "healthy_pods", "evicted_ready", "refused"),
    [
        (None, 2, True, True),  # 2 needed, 2 healthy: a ready pod may not go
        (None, 3, True, False),
        (None, 2, False, False),  # IfHealthyBudget: an unready pod may go while the budget holds
        (None, 1, False, True),  # ...but not once it is broken
        ("AlwaysAllow", 1, False, False),
    ],
)
def test_eviction_decision(policy: str | None, healthy_pods: int, evicted_ready: bool, refused: bool) -> None:
    spec: dict[str, Any] = {"minAvailable": 2}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    victim = _pod("victim", ready=evicted_ready)
    pods = [_pod(str(i)) for i in range(healthy_pods)] + ([] if evicted_ready else [victim])
    if evicted_ready:
        victim = pods[0]
    pdb = _pdb(**spec)
    assert (disruption.eviction_refusal(pdb, disruption.compute(pdb, pods), victim) is not None) is refused


def _node(ready: str | None, unschedulable: bool = False, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"metadata": {"name": "n"}, "spec": {"taints": taints or []}}
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if ready is not None:
        node["status"] = {"conditions": [{"type": "Ready", "status": ready}]}
    return node


NOT_READY = {"key": admission.NOT_READY, "effect": "NoSchedule"}
UNREACHABLE = {"key": admission.UNREACHABLE, "effect": "NoSchedule"}
UNSCHEDULABLE = {"key": admission.UNSCHEDULABLE, "effect": "NoSchedule"}
USER = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (_node(None), [NOT_READY]),
        (_node("True", taints=[NOT_READY]), []),
        (_node("False"), [NOT_READY]),
        (_node("Unknown", taints=[NOT_READY]), [UNREACHABLE]),
        (_node("True", unschedulable=True), [UNSCHEDULABLE]),
        (_node("True", taints=[USER, NOT_READY]), [USER]),
        (_node("True", taints=[USER]), None),  # already right: no write
    ],
    ids=["new", "ready", "not-ready", "unknown", "cordoned", "keeps-users", "no-change"],
)
def test_node_lifecycle_taints(node: dict[str, Any], expected: list[dict[str, str]] | None) -> None:
    assert admission.reconcile_node_taints(node) == expected


def test_a_silent_node_turns_unknown_once() -> None:
    node = _node("True")
    marked = admission.mark_unknown(node, "2026-01-01T00:00:00Z")
    assert marked is not None
    ready = marked["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert admission.mark_unknown(marked, "2026-01-01T00:01:00Z") is None
