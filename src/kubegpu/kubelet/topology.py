"""NUMA topology hints and the topology manager's policies, for device-plugin resources.

Owns the device manager's ``generateDeviceTopologyHints`` (kubelet §10: a hint
per combination of NUMA nodes that holds enough available + reusable devices,
preferred when it is as small as possible) and the topology manager's merge
of the hints of a container's resources under the ``none``, ``best-effort``,
``restricted`` and ``single-numa-node`` policies (container scope). Other hint
providers of a real node (CPU and memory managers) are absent: they would say
"no preference". Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubegpu.kubelet.devices import ResourceDevices

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


@dataclass(frozen=True)
class Hint:
    """A ``TopologyHint``: a NUMA affinity (None: any) and whether it is preferred."""

    affinity: frozenset[int] | None
    preferred: bool

    def to_json(self) -> dict[str, object]:
        return {"numa": None if self.affinity is None else sorted(self.affinity), "preferred": self.preferred}


def numa_masks(nodes: Sequence[int]) -> Iterable[frozenset[int]]:
    """Every non-empty combination of ``nodes``: all singles, then all pairs, ... (bitmask.IterateBitMasks)."""
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(sorted(nodes), size):
            yield frozenset(combo)


def device_hints(
    devices: ResourceDevices,
    numa_nodes: Sequence[int],
    available: Iterable[str],
    reusable: Iterable[str],
    request: int,
) -> list[Hint]:
    """The hints of one resource for a request of ``request`` devices."""
    min_size = len(numa_nodes)
    available = list(available)
    reusable = list(reusable)
    hints: list[Hint] = []
    for mask in numa_masks(numa_nodes):
        in_mask = sum(1 for d in devices.all.values() if mask & set(d.numa_nodes))
        if in_mask >= request and len(mask) < min_size:
            min_size = len(mask)
        matching = 0
        fits = True
        for device in reusable:
            known = devices.all.get(device)
            if known is None or known.numa is None:
                continue
            if not mask & set(known.numa_nodes):
                fits = False
                break
            matching += 1
        if not fits:
            continue
        matching += sum(1 for d in available if mask & set(devices.numa_of(d)))
        if matching >= request:
            hints.append(Hint(mask, False))
    return [Hint(h.affinity, h.affinity is not None and len(h.affinity) == min_size) for h in hints]


def _narrower(a: frozenset[int], b: frozenset[int]) -> bool:
    """bitmask.IsNarrowerThan: fewer nodes, or as many with a lower bitmask value."""
    if len(a) == len(b):
        return sum(1 << n for n in a) < sum(1 << n for n in b)
    return len(a) < len(b)


def merge(policy: str, numa_nodes: Sequence[int], hints: Mapping[str, list[Hint] | None]) -> tuple[Hint, bool]:
    """The best hint over all resources, and whether the policy admits the container.

    ``hints`` maps each resource to its hints; None means "no preference", an
    empty list "no possible affinity".
    """
    if policy == "none":
        return Hint(None, True), True
    everything = frozenset(numa_nodes)
    per_resource: list[list[Hint]] = []
    for resource_hints in hints.values():
        if resource_hints is None:
            per_resource.append([Hint(None, True)])
        elif not resource_hints:
            per_resource.append([Hint(None, False)])
        else:
            per_resource.append(list(resource_hints))
    if not per_resource:
        # No provider had anything to say.
        per_resource = [[Hint(None, True)]]
    if policy == "single-numa-node":
        per_resource = [
            [h for h in group if h.preferred and (h.affinity is None or len(h.affinity) == 1)] for group in per_resource
        ]
    best = Hint(everything, False)
    for permutation in itertools.product(*per_resource):
        merged = _merge_permutation(everything, permutation)
        if merged.affinity is None or not merged.affinity:
            continue
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        assert best.affinity is not None
        if _narrower(merged.affinity, best.affinity):
            best = merged
    if policy == "single-numa-node" and best.affinity == everything:
        best = Hint(None, best.preferred)
    admit = True if policy == "best-effort" else best.preferred
    return best, admit


def _merge_permutation(everything: frozenset[int], permutation: Sequence[Hint]) -> Hint:
    preferred = True
    affinities: list[frozenset[int]] = []
    for hint in permutation:
        if hint.affinity is not None:
            affinities.append(hint.affinity)
            # Only preferred when every resource wants the same NUMA nodes.
            if hint.affinity != affinities[0]:
                preferred = False
        if not hint.preferred:
            preferred = False
    merged = everything
    for affinity in affinities:
        merged = merged & affinity
    return Hint(merged, preferred)
