"""What the real control plane does to an object on its way in, beyond storing it: defaulting, validation,
the admission plugins (Priority, DefaultTolerationSeconds, TaintNodesByCondition, NamespaceLifecycle's
naming), and the node lifecycle controller's taints.

Owns those rules as pure functions over plain dicts: no store, no clock (``now`` is passed in), no I/O.
A rejected object raises ``StatusError`` with the real server's code and message.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from lightkube.utils.quantity import parse_quantity

from .codec import clone
from .status import StatusError, forbidden, invalid

Obj = dict[str, Any]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_TEXT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
DEFAULT_SCHEDULER = "default-scheduler"
PREEMPT_LOWER = "PreemptLowerPriority"
HIGHEST_USER_PRIORITY = 1_000_000_000

#: PriorityClasses every real cluster has.
SYSTEM_PRIORITY_CLASSES = (
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
)


def check_name(kind: str, group: str, name: str, dns_label: bool = False) -> None:
    """A name the real server accepts: an RFC 1123 subdomain (a label for namespaces)."""
    pattern, text, limit = (_LABEL, _LABEL_TEXT, 63) if dns_label else (_SUBDOMAIN, _SUBDOMAIN_TEXT, 253)
    if len(name) > limit:
        raise invalid(
            kind,
            group,
            name,
            [
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be no more than {limit} characters',
                )
            ],
        )
    if not pattern.match(name):
        raise invalid(kind, group, name, [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {text}')])


# --- pods ---------------------------------------------------------------------------------------------------------

_NATIVE = ("cpu", "memory", "ephemeral-storage", "storage")


def _is_extended(resource: str) -> bool:
    """Extended resources (``nvidia.com/gpu``) cannot be overcommitted: requests must equal limits."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.")) and resource not in _NATIVE


def _containers(spec: Obj) -> list[tuple[str, Obj]]:
    found = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field) or []):
            found.append((f"spec.{field}[{i}]", container))
    return found


def _quantity(value: Any) -> Decimal:
    try:
        parsed = parse_quantity(str(value))
    except ValueError:
        parsed = None
    if parsed is None:
        raise invalid(
            "Pod",
            "",
            "",
            [
                (
                    "resources",
                    "FieldValueInvalid",
                    f'Invalid value: "{value}": quantities '
                    "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )
            ],
        )
    return parsed


def validate_pod(pod: Obj) -> None:
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    causes: list[tuple[str, str, str]] = []
    if not spec.get("containers"):
        causes.append(("spec.containers", "FieldValueRequired", "Required value"))
    for path, container in _containers(spec):
        if not container.get("name"):
            causes.append((f"{path}.name", "FieldValueRequired", "Required value"))
        if not container.get("image"):
            causes.append((f"{path}.image", "FieldValueRequired", "Required value"))
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, quantity in requests.items():
            limit = limits.get(resource)
            if _is_extended(resource) and limit is None:
                causes.append(
                    (
                        f"{path}.resources.limits",
                        "FieldValueRequired",
                        "Required value: Limit must be set for non overcommitable resources",
                    )
                )
            elif limit is not None and _quantity(quantity) != _quantity(limit) and _is_extended(resource):
                causes.append(
                    (
                        f"{path}.resources.requests",
                        "FieldValueInvalid",
                        f'Invalid value: "{quantity}": must be equal to {resource} limit of {limit}',
                    )
                )
            elif limit is not None and _quantity(quantity) > _quantity(limit):
                causes.append(
                    (
                        f"{path}.resources.requests",
                        "FieldValueInvalid",
                        f'Invalid value: "{quantity}": must be less than or equal to {resource} limit of {limit}',
                    )
                )
    if causes:
        raise invalid("Pod", "", name, causes)


def _qos_class(spec: Obj) -> str:
    requests_any = limits_any = False
    guaranteed = True
    for _, container in _containers(spec):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource in ("cpu", "memory"):
            if resource in requests:
                requests_any = True
            if resource in limits:
                limits_any = True
            if resource not in limits or str(requests.get(resource)) != str(limits[resource]):
                guaranteed = False
    if not requests_any and not limits_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _tolerates(tolerations: list[Obj], key: str, effect: str) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", effect):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", key):
            return True
        if toleration.get("key") == key:
            return True
    return False


def default_pod(pod: Obj, priority_classes: list[Obj]) -> Obj:
    """A new pod as stored: defaults, the Priority admission plugin, DefaultTolerationSeconds, status Pending."""
    pod = clone(pod)
    name = pod["metadata"]["name"]
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    for _, container in _containers(spec):
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for resource, quantity in limits.items():
                requests.setdefault(resource, quantity)
    validate_pod(pod)

    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY, UNREACHABLE):
        if not _tolerates(tolerations, key, "NoExecute"):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})

    class_name = spec.get("priorityClassName")
    if class_name:
        found = next((pc for pc in priority_classes if pc["metadata"]["name"] == class_name), None)
        if found is None:
            raise forbidden("", "pods", name, f"no PriorityClass with name {class_name} was found")
    else:
        defaults = sorted((pc for pc in priority_classes if pc.get("globalDefault")), key=lambda pc: pc.get("value", 0))
        found = defaults[0] if defaults else None
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    priority = int(found.get("value", 0)) if found else 0
    policy = (found.get("preemptionPolicy") if found else None) or PREEMPT_LOWER
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise forbidden(
            "",
            "pods",
            name,
            f"the integer value of priority ({spec['priority']}) must not be provided in "
            f"pod spec; priority admission controller computed {priority} from the given PriorityClass name",
        )
    if spec.get("preemptionPolicy") is not None and found is not None and spec["preemptionPolicy"] != policy:
        raise forbidden(
            "",
            "pods",
            name,
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not "
            f"be provided in pod spec; priority admission controller computed {policy} from the given "
            "PriorityClass name",
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = spec.get("preemptionPolicy") or policy
    pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    return pod


_POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
    "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _mutable_masked(spec: Obj) -> Obj:
    masked = clone(spec)
    for field in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"):
        masked.pop(field, None)
    for field in ("containers", "initContainers"):
        for container in masked.get(field) or []:
            container.pop("image", None)
    return masked


def check_pod_update(old: Obj, new: Obj) -> None:
    """A pod's spec is immutable but for images, activeDeadlineSeconds, added tolerations and removed gates."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _mutable_masked(old_spec) != _mutable_masked(new_spec):
        raise invalid("Pod", "", old["metadata"]["name"], [("spec", "FieldValueForbidden", _POD_UPDATE_FORBIDDEN)])
    old_tol = old_spec.get("tolerations") or []
    if any(t not in (new_spec.get("tolerations") or []) for t in old_tol):
        raise invalid("Pod", "", old["metadata"]["name"], [("spec", "FieldValueForbidden", _POD_UPDATE_FORBIDDEN)])
    gates = new_spec.get("schedulingGates") or []
    if any(g not in (old_spec.get("schedulingGates") or []) for g in gates):
        raise invalid(
            "Pod",
            "",
            old["metadata"]["name"],
            [
                (
                    "spec.schedulingGates",
                    "FieldValueForbidden",
                    "Forbidden: only deletion is allowed, but found new scheduling gate",
                )
            ],
        )


# --- nodes --------------------------------------------------------------------------------------------------------


def _ready_status(node: Obj) -> str | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def admit_node(node: Obj) -> Obj:
    """TaintNodesByCondition: every new Node starts with the not-ready NoSchedule taint."""
    node = clone(node)
    taints = node.setdefault("spec", {}).setdefault("taints", [])
    if not any(t.get("key") == NOT_READY and t.get("effect") == "NoSchedule" for t in taints):
        taints.append({"key": NOT_READY, "effect": "NoSchedule"})
    return node


def reconcile_node_taints(node: Obj) -> list[Obj] | None:
    """The node lifecycle controller's NoSchedule taints for the node's Ready condition and ``spec.unschedulable``:
    the taint list it would write, or None when the node already carries the right ones."""
    ready = _ready_status(node)
    wanted = set()
    if ready == "Unknown":
        wanted.add(UNREACHABLE)
    elif ready != "True":
        wanted.add(NOT_READY)
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.add(UNSCHEDULABLE)
    current = (node.get("spec") or {}).get("taints") or []
    managed = {NOT_READY, UNREACHABLE, UNSCHEDULABLE}
    taints = [
        t
        for t in current
        if not (t.get("key") in managed and t.get("effect") == "NoSchedule" and t.get("key") not in wanted)
    ]
    for key in sorted(wanted):
        if not any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return None if taints == current else taints


# --- priority classes ---------------------------------------------------------------------------------------------


def admit_priority_class(pc: Obj, existing: list[Obj], old: Obj | None = None) -> Obj:
    pc = clone(pc)
    name = pc["metadata"]["name"]
    value = pc.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid("PriorityClass", "scheduling.k8s.io", name, [("value", "FieldValueRequired", "Required value")])
    if old is None and name.startswith("system-"):
        raise invalid(
            "PriorityClass",
            "scheduling.k8s.io",
            name,
            [
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f"Invalid value: \"{name}\": priority class names with 'system-' prefix are reserved",
                )
            ],
        )
    if old is None and value > HIGHEST_USER_PRIORITY:
        raise invalid(
            "PriorityClass",
            "scheduling.k8s.io",
            name,
            [
                (
                    "value",
                    "FieldValueForbidden",
                    f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}",
                )
            ],
        )
    if old is not None and old.get("value") != value:
        raise invalid(
            "PriorityClass",
            "scheduling.k8s.io",
            name,
            [("value", "FieldValueForbidden", "Forbidden: may not be changed in an update.")],
        )
    pc.setdefault("preemptionPolicy", PREEMPT_LOWER)
    if pc.get("globalDefault"):
        other = next((e for e in existing if e.get("globalDefault") and e["metadata"]["name"] != name), None)
        if other is not None:
            raise StatusError(
                403,
                "Forbidden",
                f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: '
                f"PriorityClass {other['metadata']['name']} is already marked as default. "
                "Only one default can exist",
            )
    return pc


NODE_STATUS_UNKNOWN = "Kubelet stopped posting node status."


def mark_unknown(node: Obj, now: str) -> Obj | None:
    """The node lifecycle controller's write for a node whose kubelet went silent: every condition Unknown with
    reason NodeStatusUnknown (None when they already are)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if not conditions:
        conditions = [{"type": "Ready"}]
    if all(c.get("status") == "Unknown" for c in conditions):
        return None
    marked = [
        {
            **c,
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": NODE_STATUS_UNKNOWN,
            "lastTransitionTime": now if c.get("status") != "Unknown" else c.get("lastTransitionTime", now),
        }
        for c in conditions
    ]
    return {**node, "status": {**(node.get("status") or {}), "conditions": marked}}


# --- events -------------------------------------------------------------------------------------------------------


def validate_event(event: Obj) -> None:
    """core/v1 Event validation ("legacy"): an Event without eventTime must be in its object's namespace; one with
    eventTime (new style) must name its reporting component and instance, action and reason."""
    meta = event["metadata"]
    namespace, involved = meta.get("namespace") or "", (event.get("involvedObject") or {}).get("namespace") or ""
    causes: list[tuple[str, str, str]] = []
    mismatch = (
        "involvedObject.namespace",
        "FieldValueInvalid",
        f'Invalid value: "{involved}": does not match event.namespace',
    )
    if not event.get("eventTime"):
        if (involved and involved != namespace) or (not involved and namespace not in ("", "default")):
            causes.append(mismatch)
    else:
        if not involved and namespace not in ("default", "kube-system"):
            causes.append(mismatch)
        for field in ("reportingComponent", "reportingInstance", "action", "reason"):
            if not event.get(field):
                causes.append((field, "FieldValueRequired", "Required value"))
    if causes:
        raise invalid("Event", "", meta["name"], causes)
