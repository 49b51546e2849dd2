"""Resource arithmetic of real pods and nodes, in kube-scheduler's integer units.

Owns quantity parsing (CPU in millicores, everything else in whole units: bytes
for memory and ephemeral storage, a count for extended resources, both rounded
up as Kubernetes does) and a pod's effective request: the sum over its
containers, at least the largest init container (restartable "sidecar" init
containers add to both, as kubelet and kube-scheduler count them), plus the
pod overhead; and the non-zero variant kube-scheduler scores with (100m CPU,
200 MiB memory for a container that sets no request). Must not read objects
from the API or decide anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal

from lightkube.utils.quantity import parse_quantity

from kubegpu.scheduling.core.errors import SchedulingError

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
#: kubegpu's fractional GPU: thousandths of one GPU (the device plugin's ``--gpu-milli`` units).
GPU_MILLI = "kubegpu.io/gpu-milli"
#: The most a fractional pod may ask: one whole GPU.
MILLI_PER_GPU = 1000

#: kube-scheduler's defaults for scoring a container that requests no CPU / memory.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Resources = dict[str, int]


class QuantityError(SchedulingError, ValueError):
    """A quantity string Kubernetes would not accept; the message names resource and value."""


def quantity(resource: str, value: str | int | float) -> int:
    """``value`` of ``resource`` in its scheduler unit (CPU in millicores), rounded up."""
    try:
        parsed = parse_quantity(str(value))
    except ValueError as exc:
        raise QuantityError(f"resource {resource}: invalid quantity {value!r}") from exc
    if parsed is None:
        raise QuantityError(f"resource {resource}: invalid quantity {value!r}")
    if resource == CPU:
        parsed = parsed * 1000
    return math.ceil(Decimal(parsed))


def parse_list(values: Mapping[str, str | int | float] | None) -> Resources:
    """A Kubernetes ResourceList as integers per resource name."""
    return {name: quantity(name, v) for name, v in (values or {}).items()}


def add(into: Resources, other: Mapping[str, int], sign: int = 1) -> None:
    """``into += sign * other``, resource by resource."""
    for name, v in other.items():
        into[name] = into.get(name, 0) + sign * v


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Resource-wise maximum of two lists."""
    out = dict(a)
    for name, v in b.items():
        out[name] = max(out.get(name, 0), v)
    return out


def container_requests(requests: Mapping[str, int], limits: Mapping[str, int]) -> Resources:
    """What a container requests: its requests, and its limits where no request is set (API defaulting)."""
    out = dict(limits)
    out.update(requests)
    return out


def non_zero(requests: Mapping[str, int]) -> Resources:
    """The container's CPU and memory as kube-scheduler scores them (defaults for unset requests)."""
    return {
        CPU: requests.get(CPU) or DEFAULT_MILLI_CPU_REQUEST,
        MEMORY: requests.get(MEMORY) or DEFAULT_MEMORY_REQUEST,
    }


def pod_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]] = (),
    overhead: Mapping[str, int] | None = None,
) -> Resources:
    """A pod's effective request from its containers, (init container, restartable) pairs and overhead."""
    total: Resources = {}
    for c in containers:
        add(total, c)
    sidecars: Resources = {}
    init_max: Resources = {}
    for c, restartable in init_containers:
        if restartable:
            add(sidecars, c)
            step = dict(sidecars)
        else:
            step = dict(c)
            add(step, sidecars)
        init_max = maximum(init_max, step)
    add(total, sidecars)
    total = maximum(total, init_max)
    if overhead:
        add(total, overhead)
    return {k: v for k, v in total.items() if v}
