"""Doctor's cluster checks, through the Kubernetes API (lightkube): the troubleshooting list seen from the cluster.

GPU nodes (labelled ``nvidia.com/gpu.present=true`` or by NFD's ``feature.node.kubernetes.io/pci-10de.present``)
that report no allocatable ``nvidia.com/gpu``; GPU nodes without a running device-plugin pod; pods requesting GPUs
stuck Pending or ContainerCreating, with the events that say why; and the scheduler's leader Lease. Reads only
(list nodes, pods, events; get the Lease). Must not look at this node's files (``node`` does).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.operators import Operator
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod

from kubegpu.doctor.report import Check, failed, passed

GPU_NODE_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
PLUGIN_COMPONENT = "app.kubernetes.io/component=device-plugin"


@dataclass(frozen=True)
class ClusterOptions:
    scheduler_namespace: str = "kube-system"
    scheduler_lease: str = "kubegpu-scheduler"
    plugin_selector: str = PLUGIN_COMPONENT


def _gpu_node(node: Node) -> bool:
    labels = (node.metadata.labels if node.metadata else None) or {}
    return any(labels.get(key) == "true" for key in GPU_NODE_LABELS)


def _name(obj: Node | Pod) -> str:
    return (obj.metadata.name if obj.metadata else None) or "?"


def _requests_gpus(pod: Pod) -> bool:
    containers = [*(pod.spec.containers if pod.spec else []), *((pod.spec.initContainers or []) if pod.spec else [])]
    for container in containers:
        resources = container.resources
        wanted = {
            **((resources.limits or {}) if resources else {}),
            **((resources.requests or {}) if resources else {}),
        }
        if any(k.startswith("nvidia.com/") for k in wanted):
            return True
    return False


def _stuck(pod: Pod) -> str | None:
    """``Pending`` or ``ContainerCreating`` for a stuck pod, else None."""
    phase = pod.status.phase if pod.status else None
    if phase != "Pending":
        return None
    for status in (pod.status.containerStatuses or []) if pod.status else []:
        waiting = status.state.waiting if status.state else None
        if waiting and waiting.reason == "ContainerCreating":
            return "ContainerCreating"
    return "Pending"


def gpu_nodes_report_gpus(nodes: Iterable[Node]) -> Check:
    name = "GPU nodes advertise nvidia.com/gpu"
    gpu_nodes = [n for n in nodes if _gpu_node(n)]
    if not gpu_nodes:
        return failed(
            name,
            "no node is labelled nvidia.com/gpu.present=true or feature.node.kubernetes.io/pci-10de.present=true",
            "label the GPU nodes: kubectl label node NODE nvidia.com/gpu.present=true (or run Node Feature Discovery)",
        )
    empty = []
    for node in gpu_nodes:
        allocatable = (node.status.allocatable if node.status else None) or {}
        gpus = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and str(v) not in ("0", "")}
        if not gpus:
            empty.append(_name(node))
    if empty:
        return failed(
            name,
            f"GPU nodes with no allocatable nvidia.com/* resource: {', '.join(sorted(empty))}",
            "the device plugin is not registered on them: run kubegpu doctor on the node, and check the plugin pod "
            "(kubectl -n kube-system logs -l app.kubernetes.io/component=device-plugin)",
        )
    return passed(name, f"{len(gpu_nodes)} GPU nodes advertise GPUs")


def plugin_pods_running(nodes: Iterable[Node], plugin_pods: Iterable[Pod]) -> Check:
    name = "device-plugin pods"
    running = {
        p.spec.nodeName for p in plugin_pods if p.spec and p.spec.nodeName and p.status and p.status.phase == "Running"
    }
    gpu_nodes = sorted(_name(n) for n in nodes if _gpu_node(n))
    missing = [n for n in gpu_nodes if n not in running]
    if missing:
        return failed(
            name,
            f"no running device-plugin pod on: {', '.join(missing)}",
            "check the DaemonSet (kubectl -n kube-system describe ds -l app.kubernetes.io/component=device-plugin): "
            "a taint it does not tolerate, a node label its affinity needs, or a crash (kubectl logs)",
        )
    return passed(name, f"running on all {len(gpu_nodes)} GPU nodes")


def stuck_gpu_pods(pods: Iterable[Pod], events: Iterable[Event]) -> Check:
    name = "pods waiting for GPUs"
    by_pod: dict[tuple[str, str], list[str]] = {}
    for event in events:
        obj = event.involvedObject
        if obj.kind == "Pod" and obj.name:
            by_pod.setdefault((obj.namespace or "", obj.name), []).append(f"{event.reason}: {event.message}")
    stuck = []
    for pod in pods:
        state = _stuck(pod) if _requests_gpus(pod) else None
        if state:
            namespace = (pod.metadata.namespace if pod.metadata else None) or ""
            why = by_pod.get((namespace, _name(pod)), [])
            stuck.append(f"{namespace}/{_name(pod)} {state}" + (f" ({why[-1]})" if why else ""))
    if stuck:
        return failed(
            name,
            "; ".join(stuck),
            "Pending: not enough free GPUs of that resource, or no node the pod tolerates (kubectl describe pod); "
            "ContainerCreating: the plugin's Allocate failed or the runtime cannot inject the GPU (kubectl describe "
            "pod, then kubegpu doctor on its node)",
        )
    return passed(name, "no pod requesting GPUs is stuck Pending or ContainerCreating")


def scheduler_lease(lease: Lease | None, opts: ClusterOptions, now: datetime.datetime) -> Check:
    name = "scheduler leader"
    where = f"Lease {opts.scheduler_namespace}/{opts.scheduler_lease}"
    fix = (
        f"start the scheduler (kubectl -n {opts.scheduler_namespace} get deploy "
        "-l app.kubernetes.io/component=scheduler) and check its log and RBAC for coordination.k8s.io leases"
    )
    if lease is None or lease.spec is None:
        return failed(name, f"{where} does not exist: no scheduler has ever led", fix)
    holder = lease.spec.holderIdentity
    if not holder:
        return failed(name, f"{where} has no holder", fix)
    renewed = lease.spec.renewTime
    duration = lease.spec.leaseDurationSeconds or 15
    if renewed is not None:
        age = (now - renewed).total_seconds()
        if age > duration:
            return failed(name, f"{where}: holder {holder} last renewed {age:.0f} s ago (lease {duration} s)", fix)
    return passed(name, f"{where} held by {holder}")


async def run(client: AsyncClient, opts: ClusterOptions) -> list[Check]:
    """Every cluster check; an API error becomes a failed check naming it."""
    try:
        nodes = [n async for n in client.list(Node)]
        pods = [p async for p in client.list(Pod, namespace="*")]
        plugin_pods = [p async for p in client.list(Pod, namespace="*", labels=_selector(opts.plugin_selector))]
        events = [e async for e in client.list(Event, namespace="*")]
    except ApiError as exc:
        return [failed("cluster API", f"listing nodes, pods and events failed: {exc}", "check the kubeconfig's RBAC")]
    except Exception as exc:
        return [failed("cluster API", f"cannot reach the API server: {exc}", "check --kubeconfig and the network")]
    lease: Lease | None
    try:
        lease = await client.get(Lease, name=opts.scheduler_lease, namespace=opts.scheduler_namespace)
    except ApiError as exc:
        if exc.status.code != 404:
            return [failed("cluster API", f"reading the scheduler Lease failed: {exc}", "check the kubeconfig's RBAC")]
        lease = None
    now = datetime.datetime.now(datetime.UTC)
    return [
        gpu_nodes_report_gpus(nodes),
        plugin_pods_running(nodes, plugin_pods),
        stuck_gpu_pods(pods, events),
        scheduler_lease(lease, opts, now),
    ]


async def pod_cuda(client: AsyncClient, namespace: str, name: str) -> tuple[str | None, str | None]:
    """The CUDA a pod's containers need: a ``CUDA_VERSION`` env value, else the first image whose tag names one.

    Returns (cuda_version, image), one of them set, or (None, None). Raises ApiError (404: no such pod).
    """
    from kubegpu.doctor import facts

    pod = await client.get(Pod, name=name, namespace=namespace)
    containers = [*((pod.spec.initContainers or []) if pod.spec else []), *(pod.spec.containers if pod.spec else [])]
    for container in containers:
        for env in container.env or []:
            if env.name == "CUDA_VERSION" and env.value:
                return env.value, None
    for container in containers:
        if container.image and facts.cuda_of_image(container.image):
            return None, container.image
    return None, None


def _selector(text: str) -> dict[str, str | Operator[Any] | Iterable[Any] | None]:
    return {key: value for key, _, value in (part.partition("=") for part in text.split(",") if "=" in part)}
