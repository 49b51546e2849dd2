"""The scheduler's view of Pods, Nodes, PriorityClasses and PodGroups: frozen values translated from API objects.

Owns :class:`PodInfo`, :class:`NodeInfo`, :class:`PodGroupInfo` and the
scheduling-relevant parts of a spec (taints, tolerations, node-selector
terms), the translation from lightkube models into them, and the names of the
labels and annotations the scheduler reads and writes. Must not decide
anything and does no I/O: translation reads only the object it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubegpu.scheduling.core import exactgpus
from kubegpu.scheduling.live import resources
from kubegpu.scheduling.live.resources import Resources

#: Node label with the GPU product, written by ``kubegpu labels`` and NVIDIA's GPU feature discovery.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Pod annotation with the GPUs the scheduler chose: device IDs as the plugin advertises them, comma-separated.
GPU_DEVICES_ANNOTATION = "kubegpu.io/gpu-devices"
#: Node annotation listing the node's GPU device IDs in index order (else the scheduler uses "0", "1", ...).
NODE_GPU_IDS_ANNOTATION = "kubegpu.io/gpu-devices"
#: Pod annotation with the share (milli of the one GPU in ``kubegpu.io/gpu-devices``) of a fractional pod.
GPU_MILLI_ANNOTATION = "kubegpu.io/gpu-milli"
#: Pod annotation with the node the scheduler chose, written together with the devices before binding.
ASSIGNED_NODE_ANNOTATION = "kubegpu.io/assigned-node"
#: Pod annotation naming the gang plan a member was assigned in (all members of one plan share it).
GANG_PLAN_ANNOTATION = "kubegpu.io/gang-plan"
#: Pod label naming its PodGroup (the coscheduling convention of scheduler-plugins).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

NEVER = "Never"
PREEMPT_LOWER = "PreemptLowerPriority"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: effect (empty = all), key (empty with Exists = all), value for Equal."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node-selector requirement: ``key operator values`` (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Term:
    """A node-selector term: all expressions (labels) and fields (``metadata.name``) must match."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpu_ids: tuple[str, ...] = ()
    #: The node's ``kubegpu.io/gpus`` annotation text ("" when it publishes none).
    gpus_text: str = ""

    @property
    def gpu_count(self) -> int:
        return self.allocatable.get(resources.GPU, 0)

    def gpu_id(self, index: int) -> str:
        """The device ID of GPU ``index`` as the node publishes it, else its index."""
        return self.gpu_ids[index] if index < len(self.gpu_ids) else str(index)


@dataclass(frozen=True, slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    requests: Resources = field(default_factory=dict)
    #: CPU and memory as kube-scheduler scores them (defaults for containers without requests).
    non_zero: Resources = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    priority: int | None = None
    priority_class: str = ""
    #: "" when the pod does not say (its PriorityClass's policy applies, else PreemptLowerPriority).
    preemption_policy: str = ""
    created: float = 0.0
    node_selector: dict[str, str] = field(default_factory=dict)
    #: Required node-affinity terms (any must match); None when the pod has none.
    affinity: tuple[Term, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    group: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    nominated_node: str = ""
    resource_version: str = ""
    #: Why the pod's GPU request cannot be placed whatever the cluster (both forms, an impossible share); "" if none.
    request_problem: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def gpus(self) -> int:
        return self.requests.get(resources.GPU, 0)

    @property
    def gpu_milli(self) -> int:
        """The share of one GPU a fractional pod asks (``kubegpu.io/gpu-milli``), 0 for other pods."""
        return self.requests.get(resources.GPU_MILLI, 0)

    @property
    def group_key(self) -> str:
        return f"{self.namespace}/{self.group}" if self.group else ""

    @property
    def assigned_node(self) -> str:
        return self.annotations.get(ASSIGNED_NODE_ANNOTATION, "")

    @property
    def gpu_devices(self) -> tuple[str, ...]:
        value = self.annotations.get(GPU_DEVICES_ANNOTATION, "")
        return tuple(d for d in value.split(",") if d)


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    namespace: str
    name: str
    min_member: int = 1
    timeout_s: float = 60.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _get(obj: Any, name: str) -> Any:
    return getattr(obj, name, None) if obj is not None else None


def _requirements(items: Any) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.key, r.operator, tuple(r.values or ())) for r in items or ())


def node_info(node: Any) -> NodeInfo:
    """A lightkube ``Node`` as the scheduler sees it."""
    meta, spec, status = node.metadata, node.spec, node.status
    annotations = dict(meta.annotations or {})
    ids = tuple(i for i in annotations.get(NODE_GPU_IDS_ANNOTATION, "").split(",") if i)
    taints = tuple(Taint(t.key, t.value or "", t.effect) for t in (_get(spec, "taints") or ()))
    return NodeInfo(
        name=meta.name,
        allocatable=resources.parse_list(_get(status, "allocatable")),
        labels=dict(meta.labels or {}),
        taints=taints,
        unschedulable=bool(_get(spec, "unschedulable")),
        gpu_ids=ids,
        gpus_text=annotations.get(exactgpus.GPUS_ANNOTATION, ""),
    )


def _container(c: Any) -> resources.Resources:
    res = c.resources
    return resources.container_requests(
        resources.parse_list(_get(res, "requests")), resources.parse_list(_get(res, "limits"))
    )


def request_problem(raw_containers: list[Any], requests: Resources) -> str:
    """Why a pod's GPU request can never be placed: both forms, a zero share, more than one GPU; "" when fine."""
    milli = resources.GPU_MILLI
    if requests.get(resources.GPU, 0) and requests.get(milli, 0):
        return f"pod asks for both {resources.GPU} and {milli}: ask for whole GPUs or for a share of one GPU, not both"
    for c in raw_containers:
        for values in (_get(c.resources, "requests"), _get(c.resources, "limits")):
            if values and milli in values and resources.quantity(milli, values[milli]) <= 0:
                return f"container {c.name}: {milli} must be 1..{resources.MILLI_PER_GPU}, got {values[milli]}"
    share = requests.get(milli, 0)
    if share > resources.MILLI_PER_GPU:
        return (
            f"pod asks for {share} {milli}, more than one GPU ({resources.MILLI_PER_GPU}): a share is part of one "
            f"GPU; ask for whole GPUs with {resources.GPU}"
        )
    return ""


def pod_info(pod: Any) -> PodInfo:
    """A lightkube ``Pod`` as the scheduler sees it (requests summed as kube-scheduler sums them)."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    containers = [_container(c) for c in spec.containers or ()]
    inits = [(_container(c), _get(c, "restartPolicy") == "Always") for c in spec.initContainers or ()]
    requests = resources.pod_requests(containers, inits, resources.parse_list(spec.overhead))
    problem = request_problem([*(spec.initContainers or ()), *(spec.containers or ())], requests)
    non_zero: Resources = {}
    for c in containers:
        resources.add(non_zero, resources.non_zero(c))
    affinity = None
    node_affinity = _get(_get(spec, "affinity"), "nodeAffinity")
    required = _get(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        affinity = tuple(
            Term(_requirements(t.matchExpressions), _requirements(t.matchFields)) for t in required.nodeSelectorTerms
        )
    tolerations = tuple(
        Toleration(t.key or "", t.operator or "Equal", t.value or "", t.effect or "") for t in spec.tolerations or ()
    )
    labels = dict(meta.labels or {})
    created = meta.creationTimestamp.timestamp() if meta.creationTimestamp else 0.0
    return PodInfo(
        uid=meta.uid or f"{meta.namespace}/{meta.name}",
        namespace=meta.namespace or "default",
        name=meta.name,
        requests=requests,
        non_zero=non_zero,
        scheduler_name=spec.schedulerName or "default-scheduler",
        node_name=spec.nodeName or "",
        phase=_get(status, "phase") or "Pending",
        deleting=meta.deletionTimestamp is not None,
        priority=spec.priority,
        priority_class=spec.priorityClassName or "",
        preemption_policy=spec.preemptionPolicy or "",
        created=created,
        node_selector=dict(spec.nodeSelector or {}),
        affinity=affinity,
        tolerations=tolerations,
        group=labels.get(POD_GROUP_LABEL, ""),
        annotations=dict(meta.annotations or {}),
        nominated_node=_get(status, "nominatedNodeName") or "",
        resource_version=meta.resourceVersion or "",
        request_problem=problem,
    )


def pod_group_info(obj: Any) -> PodGroupInfo:
    """A PodGroup (``scheduling.x-k8s.io/v1alpha1``, generic resource) as the scheduler sees it."""
    meta = obj.metadata
    spec = obj.get("spec", {}) if hasattr(obj, "get") else (getattr(obj, "spec", None) or {})
    min_member = int(spec.get("minMember") or 1)
    timeout = spec.get("scheduleTimeoutSeconds")
    return PodGroupInfo(meta.namespace or "default", meta.name, max(1, min_member), float(timeout or 60))
