"""Which devices a container gets: the kubelet's ``devicesToAllocate``, step by step.

Owns the device manager's choice for one (container, resource): the checks
and their exact error texts, reuse of devices released by init containers,
the NUMA split into aligned / unaligned / no-topology devices, the arguments
of ``GetPreferredAllocation`` and how its answer is used. Pure: it never calls
a plugin. :func:`plan` stops where the kubelet would call
``GetPreferredAllocation`` and says with what; the caller asks the plugin (or
not, when the plugin did not opt in) and hands the answer to :func:`complete`.

Kubelet facts kept here: ``allocation_size`` is the container's full request,
not what is left; ``must_include`` is what was picked already (reused
devices); only devices of the set the kubelet offered are taken from the
answer, extra or unknown IDs are ignored, and a short answer is filled up.
Where the kubelet iterates a Go set (random order) we use the plugin's listing
order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubegpu.kubelet import errors
from kubegpu.kubelet.devices import NO_TOPOLOGY, ResourceDevices


@dataclass(frozen=True)
class PreferredQuery:
    """The arguments of the one ``ContainerPreferredAllocationRequest`` the kubelet sends."""

    available: tuple[str, ...]
    must_include: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class Plan:
    """A choice in progress: ``picked`` so far, ``needed`` more, and how to get them."""

    resource: str
    required: int
    picked: tuple[str, ...]
    needed: int
    #: What to ask the plugin, when more devices are needed (None: ``picked`` is the answer).
    query: PreferredQuery | None = None
    #: The plugin's answer is only taken from these devices.
    within: tuple[str, ...] = ()
    #: Then the shortfall is filled from these groups, in order.
    fallbacks: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Request:
    """Everything the kubelet looks at to choose devices for one (container, resource)."""

    pod_uid: str
    container: str
    resource: str
    #: The container's limit for the resource (K).
    required: int
    #: Devices this container already holds for the resource (container restart, restored state).
    existing: frozenset[str] | None
    #: False when the kubelet has no entry for the resource (never registered, or removed).
    registered: bool
    devices: ResourceDevices
    #: Devices of the resource allocated to any container (this pod's included).
    in_use: frozenset[str]
    #: Devices released by earlier init containers of the same pod, taken first.
    reusable: tuple[str, ...] = ()
    #: NUMA nodes the topology manager chose for the container; None: no affinity.
    affinity: frozenset[int] | None = None


def plan(req: Request) -> Plan | None:
    """Check the request and choose what can be chosen without the plugin; None: nothing to allocate.

    Raises :class:`~kubegpu.kubelet.errors.AllocationError` with the kubelet's text.
    """
    needed = req.required
    if req.existing is not None:
        needed -= len(req.existing)
        if needed != 0:
            raise errors.AllocationError(
                f'pod "{req.pod_uid}" container "{req.container}" changed request for resource '
                f'"{req.resource}" from {len(req.existing)} to {req.required}'
            )
    # The kubelet checks registration and health before it looks at the count (kubernetes#109595).
    if not req.registered:
        raise errors.AllocationError(f"cannot allocate unregistered device {req.resource}")
    healthy = req.devices.healthy
    if not healthy:
        raise errors.AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {req.resource}")
    if req.existing is not None and not req.existing <= healthy:
        raise errors.AllocationError(
            f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {req.resource}"
        )
    if needed == 0:
        return None

    picked: list[str] = []
    for device in req.reusable:
        if device not in picked:
            picked.append(device)
            needed -= 1
            if needed == 0:
                return Plan(req.resource, req.required, tuple(picked), 0)

    available = req.devices.ordered(healthy - req.in_use - set(picked))
    if len(available) < needed:
        raise errors.AllocationError(
            f"requested number of devices unavailable for {req.resource}. "
            f"Requested: {needed}, Available: {len(available)}"
        )
    aligned, unaligned, no_topology = split_by_affinity(req.devices, available, req.affinity)

    if needed < len(aligned):
        # Everything fits in the aligned set: let the plugin choose among those.
        offered = req.devices.ordered([*aligned, *picked])
        query = PreferredQuery(tuple(offered), tuple(picked), req.required)
        return Plan(req.resource, req.required, tuple(picked), needed, query, tuple(aligned), (tuple(aligned),))

    # Take every aligned device first, so the topology manager's alignment holds; then ask about the rest.
    for device in aligned:
        picked.append(device)
        needed -= 1
    if needed == 0:
        return Plan(req.resource, req.required, tuple(picked), 0)
    offered = req.devices.ordered([*available, *picked])
    query = PreferredQuery(tuple(offered), tuple(picked), req.required)
    return Plan(
        req.resource,
        req.required,
        tuple(picked),
        needed,
        query,
        tuple(available),
        (tuple(unaligned), tuple(no_topology)),
    )


def complete(p: Plan, preferred: Sequence[str] = ()) -> tuple[str, ...]:
    """Finish a plan with the plugin's preferred IDs (empty when it was not asked); returns all K devices."""
    chosen = list(p.picked)
    needed = p.needed
    within = set(p.within)
    for group in (tuple(d for d in preferred if d in within), *p.fallbacks):
        for device in group:
            if needed == 0:
                break
            if device not in chosen:
                chosen.append(device)
                needed -= 1
    if needed:
        raise errors.AllocationError(
            f"unexpectedly allocated less resources than required. Requested: {p.required}, Got: {p.required - needed}"
        )
    return tuple(chosen)


def split_by_affinity(
    devices: ResourceDevices, available: Sequence[str], affinity: frozenset[int] | None
) -> tuple[list[str], list[str], list[str]]:
    """The kubelet's ``filterByAffinity``: (aligned, unaligned, without topology) devices.

    Without an affinity, or when no device of the resource has topology, every
    device counts as having no topology. A device on several NUMA nodes goes to
    the group of the first of its nodes in the kubelet's node order: nodes in
    the affinity first, then other nodes, each by ascending device count.
    """
    if affinity is None or not devices.has_topology_alignment():
        return [], [], list(available)
    per_node: dict[int, set[str]] = {}
    for device in available:
        for node in devices.numa_of(device) or (NO_TOPOLOGY,):
            per_node.setdefault(node, set()).add(device)

    def rank(node: int) -> tuple[int, int, int]:
        group = 0 if node in affinity else (2 if node == NO_TOPOLOGY else 1)
        return (group, len(per_node[node]), node)

    nodes = sorted(per_node, key=rank)
    aligned: list[str] = []
    unaligned: list[str] = []
    without: list[str] = []
    for device in available:
        node = next(n for n in nodes if device in per_node[n])
        if node == NO_TOPOLOGY:
            without.append(device)
        elif node in affinity:
            aligned.append(device)
        else:
            unaligned.append(device)
    return aligned, unaligned, without
