"""GetPreferredAllocation: the kubelet's device IDs in, :mod:`kubegpu.placement`'s choice out.

Owns the mapping between one resource's device IDs and what the placement
policies place: whole GPUs by GPU index (policies ``topology``, ``best-effort``),
replicas and MIG devices by ID, grouped by the physical GPU they live on
(``distributed``, ``packed``); milli units all from one GPU (:mod:`.milli`, best fit);
which of the kinds a resource is; refusing unknown IDs; and wording placement's refusals as the plugin's
:class:`~kubegpu.deviceplugin.errors.InvalidRequest` (gRPC ``INVALID_ARGUMENT``).
The policies themselves live in :mod:`kubegpu.placement`. Duplicate IDs in a
request count once (the kubelet builds its lists from sets). Whole-GPU answers are
kept by the exact request (the policies are pure functions of it; ``ANSWERS_KEPT`` at most). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubegpu import placement
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.rm import milli
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu.model import Topology

#: Whole-GPU answers kept per resource (the kubelet asks again and again for the same free set and size).
ANSWERS_KEPT = 4096


def places_whole_gpus(resource: Resource) -> bool:
    """True when every device of ``resource`` is a whole GPU (no replica, MIG device or milli unit): by topology."""
    return all(d.replica is None and d.mig is None and d.milli is None for d in resource.devices)


def _invalid(resource_name: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f'invalid preferred allocation request for "{resource_name}": {reason}')


def _known(resource: Resource, ids: Sequence[str], where: str) -> list[str]:
    unique = list(dict.fromkeys(ids))
    for device_id in unique:
        if device_id not in resource.by_id:
            raise _invalid(resource.name, f"unknown {where} device: {device_id}")
    return unique


class Preferred:
    """GetPreferredAllocation for one resource under one policy; the ID tables are built once, not per call.

    ``policy`` must suit the resource (a whole-GPU policy for whole GPUs, a shared one otherwise).
    """

    def __init__(self, resource: Resource, topology: Topology, policy: str) -> None:
        self.resource = resource
        self.topology = topology
        self.policy = policy
        self.whole_gpus = places_whole_gpus(resource)
        self._index_of = {d.id: d.gpu_index for d in resource.devices}
        self._id_of = {d.gpu_index: d.id for d in resource.devices}
        # Built at the first shared pick: the plugin's start does not load the placement policies.
        self._shared: list[placement.SharedDevice] | None = None
        # The policy is a pure function of its inputs: a whole-GPU answer is kept by the exact request.
        self._answers: dict[tuple[tuple[str, ...], tuple[str, ...], int], tuple[str, ...]] = {}

    def __call__(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """Exactly ``size`` IDs: every must-include ID plus the policy's choice among the available.

        Whole GPUs come back in GPU index order; shared devices as the must-include IDs followed by the picks.
        Raises :class:`InvalidRequest` for an impossible request rather than answering short.
        """
        # Only whole-GPU answers are kept: a shared or milli request may list thousands of IDs.
        key = (tuple(available), tuple(must_include), size) if self.whole_gpus else None
        kept = self._answers.get(key) if key is not None else None
        if kept is not None:
            return list(kept)
        resource = self.resource
        avail = _known(resource, available, "available")
        must = _known(resource, must_include, "must-include")
        offered = set(avail)
        for device_id in must:
            if device_id not in offered:
                # Checked here, not in placement, so the message names the device ID rather than a GPU index.
                raise _invalid(resource.name, f"must-include device {device_id} is not among the available devices")
        if resource.is_milli:
            try:
                return milli.pick(resource, avail, must, size)
            except milli.ShareError as exc:
                raise _invalid(resource.name, str(exc)) from None
        try:
            if self.whole_gpus:
                index_of = self._index_of
                chosen = placement.pick(
                    self.policy, self.topology, [index_of[i] for i in avail], [index_of[i] for i in must], size
                )
                answer = [self._id_of[i] for i in chosen]
                if key is not None:
                    if len(self._answers) >= ANSWERS_KEPT:
                        self._answers.clear()
                    self._answers[key] = tuple(answer)
                return answer
            if self._shared is None:
                self._shared = [placement.SharedDevice(id=d.id, group=d.gpu_uuid) for d in resource.devices]
            return placement.pick_shared(self.policy, self._shared, avail, must, size)
        except placement.PlacementError as exc:
            raise _invalid(resource.name, str(exc)) from None


def preferred(
    resource: Resource,
    topology: Topology,
    policy: str,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
) -> list[str]:
    """One answer of :class:`Preferred` (for callers with a single request)."""
    return Preferred(resource, topology, policy)(available, must_include, size)
