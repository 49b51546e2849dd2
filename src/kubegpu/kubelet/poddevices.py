"""Which devices each container holds, with the plugin's cached Allocate answer.

Owns the device manager's ``podDevices`` store (pod uid -> container ->
resource -> devices by NUMA node + ``ContainerAllocateResponse``), the views
the manager needs of it (all allocated devices per resource, one container's
devices), the init-container reuse bookkeeping, and the conversion to and
from checkpoint entries. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet import checkpoint, errors


@dataclass
class Allocation:
    """One container's devices of one resource (the kubelet's ``deviceAllocateInfo``)."""

    #: Device IDs by NUMA node (-1: no topology).
    numa: dict[int, list[str]]
    response: api_pb2.ContainerAllocateResponse

    @property
    def ids(self) -> list[str]:
        """Every device once: NUMA groups in ascending order (-1 first), allocation order within a group.

        The checkpoint keeps only the groups, so this order is the same before and after a restart.
        """
        seen: dict[str, None] = {}
        for node in sorted(self.numa):
            seen.update(dict.fromkeys(self.numa[node]))
        return list(seen)


class PodDevices:
    """pod uid -> container -> resource -> :class:`Allocation`, in insertion order."""

    def __init__(self) -> None:
        self._devs: dict[str, dict[str, dict[str, Allocation]]] = {}

    def insert(
        self,
        uid: str,
        container: str,
        resource: str,
        numa: dict[int, list[str]],
        resp: api_pb2.ContainerAllocateResponse,
    ) -> None:
        self._devs.setdefault(uid, {}).setdefault(container, {})[resource] = Allocation(numa, resp)

    def delete(self, uids: Iterable[str]) -> None:
        for uid in uids:
            self._devs.pop(uid, None)

    def pods(self) -> list[str]:
        return list(self._devs)

    def has_pod(self, uid: str) -> bool:
        return uid in self._devs

    def devices(self) -> dict[str, set[str]]:
        """Resource -> every device allocated to any container (the kubelet's ``allocatedDevices``)."""
        out: dict[str, set[str]] = {}
        for containers in self._devs.values():
            for resources in containers.values():
                for resource, alloc in resources.items():
                    out.setdefault(resource, set()).update(alloc.ids)
        return out

    def container_devices(self, uid: str, container: str, resource: str) -> frozenset[str] | None:
        alloc = self._devs.get(uid, {}).get(container, {}).get(resource)
        return None if alloc is None else frozenset(alloc.ids)

    def container_allocations(self, uid: str, container: str) -> dict[str, Allocation]:
        return dict(self._devs.get(uid, {}).get(container, {}))

    def pod_allocations(self, uid: str) -> dict[str, dict[str, Allocation]]:
        return {c: dict(r) for c, r in self._devs.get(uid, {}).items()}

    def add_container_allocated(self, uid: str, container: str, into: dict[str, set[str]]) -> None:
        """After a normal init container: its devices may be reused by later containers of the pod."""
        for resource, alloc in self._devs.get(uid, {}).get(container, {}).items():
            into.setdefault(resource, set()).update(alloc.ids)

    def remove_container_allocated(self, uid: str, container: str, into: dict[str, set[str]]) -> None:
        """After an app or restartable init container: its devices are its own."""
        for resource, alloc in self._devs.get(uid, {}).get(container, {}).items():
            if resource in into:
                into[resource] -= set(alloc.ids)

    def save_pod(self, uid: str) -> dict[str, dict[str, Allocation]] | None:
        """A copy of one pod's entries, for :meth:`restore_pod` when an admission fails."""
        return copy.deepcopy(self._devs[uid]) if uid in self._devs else None

    def restore_pod(self, uid: str, saved: dict[str, dict[str, Allocation]] | None) -> None:
        if saved is None:
            self._devs.pop(uid, None)
        else:
            self._devs[uid] = saved

    def to_entries(self) -> tuple[checkpoint.Entry, ...]:
        return tuple(
            checkpoint.Entry(uid, container, resource, alloc.numa, alloc.response.SerializeToString())
            for uid, containers in self._devs.items()
            for container, resources in containers.items()
            for resource, alloc in resources.items()
        )

    @classmethod
    def from_entries(cls, entries: Iterable[checkpoint.Entry]) -> PodDevices:
        store = cls()
        for e in entries:
            try:
                resp = api_pb2.ContainerAllocateResponse.FromString(e.alloc_resp)
            except DecodeError as exc:
                raise errors.CheckpointError(
                    f"AllocResp of pod {e.pod_uid} container {e.container} is not a ContainerAllocateResponse: {exc}"
                ) from None
            store.insert(e.pod_uid, e.container, e.resource, {k: list(v) for k, v in e.devices.items()}, resp)
        return store
