"""The disruption controller's arithmetic for PodDisruptionBudgets (policy/v1) and the eviction decision.

Owns: which pods a budget selects, how many are healthy (Ready and not being deleted), the desired healthy
count from ``minAvailable`` / ``maxUnavailable`` (integers or percentages, rounded up), ``disruptionsAllowed``,
and whether one eviction may go ahead. Like the real controller, a budget given as ``maxUnavailable`` or a
percentage needs every selected pod to have a controller owner; bare pods make it fail safe (0 allowed).
Pure: no store, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .selectors import labels_match, selector_from_label_selector

Obj = dict[str, Any]

BUDGET_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def selects(pdb: Obj, pod: Obj) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none."""
    if (pod.get("metadata") or {}).get("namespace") != pdb["metadata"].get("namespace"):
        return False
    requirements = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
    return requirements is not None and labels_match(requirements, pod)


def is_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def is_healthy(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and is_ready(pod)


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _has_controller(pod: Obj) -> bool:
    return any(ref.get("controller") for ref in pod["metadata"].get("ownerReferences") or [])


@dataclass(frozen=True)
class Budget:
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disruptions_allowed: int
    failed: str | None = None  # why the controller could not compute it (then 0 disruptions are allowed)


def compute(pdb: Obj, pods: list[Obj]) -> Budget:
    """The budget over the namespace's pods (the caller passes them all; selection happens here)."""
    spec = pdb.get("spec") or {}
    selected = [p for p in pods if selects(pdb, p)]
    healthy = sum(1 for p in selected if is_healthy(p))
    expected = len(selected)
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    needs_controllers = max_unavailable is not None or (isinstance(min_available, str) and min_available.endswith("%"))
    if needs_controllers and any(not _has_controller(p) for p in selected):
        return Budget(healthy, 0, 0, 0, failed="found no controllers for pods selected by the budget")
    if max_unavailable is not None:
        desired = max(0, expected - _scaled(max_unavailable, expected))
    elif min_available is not None:
        desired = _scaled(min_available, expected)
    else:
        desired = max(0, expected - 0)
    return Budget(healthy, desired, expected, max(0, healthy - desired))


def status(pdb: Obj, budget: Budget, now: str) -> Obj:
    """The PDB status the disruption controller writes for a computed budget."""
    allowed = budget.disruptions_allowed > 0
    if budget.failed:
        condition = {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": budget.failed}
    else:
        condition = {
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods",
            "message": "",
        }
    old_conditions = ((pdb.get("status") or {}).get("conditions")) or []
    old = next((c for c in old_conditions if c.get("type") == "DisruptionAllowed"), None)
    same = old is not None and old.get("status") == condition["status"] and old.get("reason") == condition["reason"]
    condition["lastTransitionTime"] = old.get("lastTransitionTime") if same and old else now
    condition["observedGeneration"] = pdb["metadata"].get("generation", 1)
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "expectedPods": budget.expected_pods,
        "disruptionsAllowed": budget.disruptions_allowed,
        "conditions": [condition],
    }


def eviction_refusal(pdb: Obj, budget: Budget, pod: Obj) -> str | None:
    """Why evicting ``pod`` would break the budget (the cause's message), or None when it may go ahead.
    ``unhealthyPodEvictionPolicy`` IfHealthyBudget (default) lets an unready pod go while the budget holds,
    AlwaysAllow always lets it go."""
    spec = pdb.get("spec") or {}
    if not is_ready(pod):
        policy = spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or (budget.current_healthy >= budget.desired_healthy and not budget.failed):
            return None
    if budget.disruptions_allowed > 0:
        return None
    return (
        f"The disruption budget {pdb['metadata']['name']} needs {budget.desired_healthy} healthy pods and has "
        f"{budget.current_healthy} currently"
    )
