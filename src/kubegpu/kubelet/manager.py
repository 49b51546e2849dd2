"""The device manager: the kubelet's state of plugin resources, endpoints and allocations.

Owns what the kubelet's ``devicemanager.ManagerImpl`` owns: per resource the
devices of the last ListAndWatch snapshot and the endpoint of its plugin; per
pod and container the allocated devices with the plugin's cached Allocate
answer; the init-container reuse sets; ``Allocate(pod, container)`` and
``GetDeviceRunContainerOptions``; plugin connect/disconnect; the grace-period
removal of resources whose plugin went away (``GetCapacity``); writing and
restoring the checkpoint. Pure choices (which devices, how answers merge) are
delegated to :mod:`allocation` and :mod:`runoptions`. Must not know about
sockets other than through :class:`~kubegpu.kubelet.endpoint.Endpoint`, and
must not parse pods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet import allocation, checkpoint, errors, files, runoptions
from kubegpu.kubelet.devices import NO_TOPOLOGY, Device, ResourceDevices
from kubegpu.kubelet.endpoint import Endpoint, PluginClient
from kubegpu.kubelet.events import EventHub
from kubegpu.kubelet.pod import Container, Pod
from kubegpu.kubelet.poddevices import Allocation, PodDevices

log = logging.getLogger(__name__)


class DeviceManager:
    """The kubelet's device manager, minus the parts that need a real node."""

    def __init__(
        self,
        socket_dir: Path,
        *,
        events: EventHub,
        active_pods: Callable[[], set[str]],
        grace_period: float = constants.ENDPOINT_STOP_GRACE_PERIOD_S,
        pre_start_timeout: float = constants.PRE_START_CONTAINER_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.socket_dir = socket_dir
        self.checkpoint_file = files.checkpoint_path(socket_dir)
        self.events = events
        self.grace_period = grace_period
        self.pre_start_timeout = pre_start_timeout
        self._active_pods = active_pods
        self._clock = clock
        #: allDevices + healthyDevices + unhealthyDevices; a key here means "registered".
        self.resources: dict[str, ResourceDevices] = {}
        self.endpoints: dict[str, Endpoint] = {}
        #: Resources dropped after their grace period; node status keeps them at capacity 0.
        self.removed: set[str] = set()
        self.registrations: dict[str, int] = {}
        self.pod_devices = PodDevices()
        #: allocatedDevices: pod_devices' devices plus reservations of an allocation in progress.
        self.allocated: dict[str, set[str]] = {}
        #: Devices released by init containers, for the one pod being admitted.
        self.devices_to_reuse: dict[str, dict[str, set[str]]] = {}
        #: The pod being admitted: protected from garbage collection.
        self.pending_pod: str | None = None
        #: Allocate RPCs made since start (tests and benchmarks read it).
        self.allocate_calls = 0

    # ----- plugins ---------------------------------------------------------------------------

    def plugin_connected(self, resource: str, client: PluginClient, options: api_pb2.DevicePluginOptions) -> None:
        """A registration succeeded: a new endpoint replaces the old one; devices wait for the first snapshot."""
        self.endpoints[resource] = Endpoint(resource, client, options)
        self.removed.discard(resource)
        self.registrations[resource] = self.registrations.get(resource, 0) + 1
        log.info(
            "device plugin connected",
            extra={"resource": resource, "socket": str(client.socket_path), "client": client.id},
        )
        self.events.publish("registered", resource=resource, socket=str(client.socket_path), client=client.id)

    def plugin_disconnected(self, resource: str, client: PluginClient, only_if_current: bool) -> None:
        """A plugin's stream ended: its healthy devices become unhealthy and the endpoint stops.

        With ``only_if_current`` (fixed upstream) nothing happens unless ``client`` is the
        resource's current endpoint; without it (kubelet 1.32) the current endpoint is
        stopped whoever's stream ended.
        """
        endpoint = self.endpoints.get(resource)
        if endpoint is None or (only_if_current and endpoint.client is not client):
            log.info("stale plugin client disconnected", extra={"resource": resource, "client": client.id})
            return
        if resource in self.resources:
            self.resources[resource].mark_unhealthy()
        endpoint.stop(self._clock())
        log.info("endpoint became unhealthy", extra={"resource": resource, "client": client.id})
        self.events.publish("disconnected", resource=resource, client=client.id)

    def list_and_watch(self, resource: str, client: PluginClient, devices: list[Device]) -> None:
        """One ListAndWatch message: a full snapshot replaces the resource's devices."""
        state = ResourceDevices.from_snapshot(devices)
        self.resources[resource] = state
        log.info(
            "devices updated",
            extra={
                "resource": resource,
                "healthy": len(state.healthy),
                "unhealthy": len(state.unhealthy),
                "client": client.id,
            },
        )
        self.events.publish(
            "devices",
            resource=resource,
            client=client.id,
            healthy=state.ordered(state.healthy),
            unhealthy=state.ordered(state.unhealthy),
        )
        # Published before the write: watchers learn of a health change without waiting for fsync.
        self.write_checkpoint_logged()

    def sweep(self) -> list[str]:
        """``GetCapacity``'s clean-up: drop resources whose endpoint stopped more than the grace period ago."""
        now = self._clock()
        gone = [
            r
            for r in self.resources
            if r not in self.endpoints or self.endpoints[r].grace_expired(now, self.grace_period)
        ]
        for resource in gone:
            del self.resources[resource]
            self.endpoints.pop(resource, None)
            self.removed.add(resource)
            log.info("resource removed after its grace period", extra={"resource": resource})
        if gone:
            self.write_checkpoint_logged()
            self.events.publish("removed", resources=gone)
        return gone

    def stop_all(self) -> None:
        """Kubelet shutdown: every endpoint is disconnected (its devices unhealthy, it stops)."""
        for resource, endpoint in self.endpoints.items():
            if not endpoint.stopped:
                if resource in self.resources:
                    self.resources[resource].mark_unhealthy()
                endpoint.stop(self._clock())

    # ----- checkpoint ------------------------------------------------------------------------

    def restore(self, cp: checkpoint.Checkpoint) -> None:
        """Load a checkpoint: allocations come back; its resources get a stopped endpoint and no devices."""
        self.pod_devices = PodDevices.from_entries(cp.entries)
        self.allocated = self.pod_devices.devices()
        now = self._clock()
        for resource in cp.registered:
            # Capacity stays 0 until the plugin registers again; then the grace period runs.
            self.resources[resource] = ResourceDevices()
            self.endpoints[resource] = Endpoint.restored(resource, now)

    def checkpoint(self) -> checkpoint.Checkpoint:
        registered = {r: state.ordered(state.healthy) for r, state in self.resources.items()}
        return checkpoint.Checkpoint(self.pod_devices.to_entries(), registered)

    def write_checkpoint(self) -> None:
        files.write_atomic(self.checkpoint_file, checkpoint.encode(self.checkpoint()))

    def write_checkpoint_logged(self) -> None:
        try:
            self.write_checkpoint()
        except OSError as exc:
            log.error("error on writing checkpoint", extra={"path": str(self.checkpoint_file), "error": str(exc)})

    # ----- allocation ------------------------------------------------------------------------

    def is_device_plugin_resource(self, resource: str) -> bool:
        """Registered now, or holding allocations (e.g. restored from the checkpoint)."""
        return resource in self.resources or resource in self.allocated

    def update_allocated_devices(self) -> None:
        """Garbage-collect allocations of pods that are neither active nor being admitted."""
        active = self._active_pods()
        if self.pending_pod is not None:
            active = active | {self.pending_pod}
        stale = [uid for uid in self.pod_devices.pods() if uid not in active]
        if stale:
            log.info("releasing devices of inactive pods", extra={"pods": stale})
            self.pod_devices.delete(stale)
        self.allocated = self.pod_devices.devices()

    async def allocate(self, pod: Pod, container: Container, affinity: frozenset[int] | None = None) -> int:
        """``Allocate(pod, container)``: devices for every plugin resource in the container's limits.

        Returns the number of Allocate RPCs made. Raises
        :class:`~kubegpu.kubelet.errors.AllocationError` with the kubelet's text.
        """
        reuse = self.devices_to_reuse.setdefault(pod.uid, {})
        for uid in [u for u in self.devices_to_reuse if u != pod.uid]:
            del self.devices_to_reuse[uid]
        calls = await self._allocate_container_resources(pod, container, reuse, affinity)
        if container.init and not container.restartable:
            self.pod_devices.add_container_allocated(pod.uid, container.name, reuse)
        else:
            # Sidecars and app containers keep their devices to themselves.
            self.pod_devices.remove_container_allocated(pod.uid, container.name, reuse)
        return calls

    async def _allocate_container_resources(
        self, pod: Pod, container: Container, reuse: dict[str, set[str]], affinity: frozenset[int] | None
    ) -> int:
        collected = False
        calls = 0
        for resource, needed in container.limits:
            if not self.is_device_plugin_resource(resource):
                continue
            if not collected:
                self.update_allocated_devices()
                collected = True
            ids = await self._devices_to_allocate(
                pod.uid, container.name, resource, needed, reuse.get(resource, set()), affinity
            )
            if not ids:
                continue
            endpoint = self.endpoints.get(resource)
            if endpoint is None:
                self.allocated = self.pod_devices.devices()
                raise errors.AllocationError(f"unknown Device Plugin {resource}")
            log.debug("allocate", extra={"resource": resource, "pod": pod.key, "container": container.name, "ids": ids})
            try:
                calls += 1
                self.allocate_calls += 1
                resp = await endpoint.allocate(ids)
            except errors.AllocationError:
                self.allocated = self.pod_devices.devices()
                raise
            if not resp.container_responses:
                # The kubelet prints the Go value of the empty response here.
                raise errors.AllocationError(
                    "no containers return in allocation response "
                    "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"
                )
            self.pod_devices.insert(
                pod.uid, container.name, resource, self._by_numa(resource, ids), resp.container_responses[0]
            )
            try:
                self.write_checkpoint()
            except OSError as exc:
                raise errors.AllocationError(f"failed to write checkpoint: {exc}") from None
        return calls

    def _by_numa(self, resource: str, ids: Iterable[str]) -> dict[int, list[str]]:
        state = self.resources.get(resource, ResourceDevices())
        grouped: dict[int, list[str]] = {}
        for device in ids:
            for node in state.numa_of(device) or (NO_TOPOLOGY,):
                grouped.setdefault(node, []).append(device)
        return grouped

    async def _devices_to_allocate(
        self,
        uid: str,
        container: str,
        resource: str,
        required: int,
        reusable: set[str],
        affinity: frozenset[int] | None,
    ) -> tuple[str, ...] | None:
        state = self.resources.get(resource)
        request = allocation.Request(
            pod_uid=uid,
            container=container,
            resource=resource,
            required=required,
            existing=self.pod_devices.container_devices(uid, container, resource),
            registered=state is not None,
            devices=state or ResourceDevices(),
            in_use=frozenset(self.allocated.get(resource, set())),
            reusable=tuple((state or ResourceDevices()).ordered(reusable)),
            affinity=affinity,
        )
        plan = allocation.plan(request)
        if plan is None:
            return None
        # Reserve what is picked so far, as the kubelet does before it calls the plugin.
        self.allocated.setdefault(resource, set()).update(plan.picked)
        preferred: list[str] = []
        if plan.query is not None:
            endpoint = self.endpoints.get(resource)
            if endpoint is None:
                raise errors.AllocationError(f"endpoint not found in cache for a registered resource: {resource}")
            if endpoint.preferred_allocation_available:
                q = plan.query
                preferred = await endpoint.get_preferred_allocation(q.available, q.must_include, q.size)
        chosen = allocation.complete(plan, preferred)
        self.allocated.setdefault(resource, set()).update(chosen)
        return chosen

    async def run_container_options(self, pod: Pod, container: Container) -> runoptions.RunOptions:
        """``GetDeviceRunContainerOptions``: PreStartContainer where required, then the merged cached answers."""
        needs_realloc = False
        for resource, quantity in container.limits:
            if not self.is_device_plugin_resource(resource) or quantity == 0:
                continue
            await self._pre_start_if_needed(pod.uid, container.name, resource)
            if pod.uid not in self._active_pods() and pod.uid != self.pending_pod:
                continue
            if self.pod_devices.container_devices(pod.uid, container.name, resource) is None:
                needs_realloc = True
        if needs_realloc:
            try:
                await self.allocate(pod, container)
            except errors.AllocationError as exc:
                raise errors.ContainerStartError(str(exc)) from None
        allocs = self.pod_devices.container_allocations(pod.uid, container.name)
        order = [r for r, _ in container.limits if r in allocs] + [r for r in allocs if r not in dict(container.limits)]
        return runoptions.merge((r, allocs[r].response) for r in order)

    async def _pre_start_if_needed(self, uid: str, container: str, resource: str) -> None:
        endpoint = self.endpoints.get(resource)
        if endpoint is None:
            raise errors.ContainerStartError(f"endpoint not found in cache for a registered resource: {resource}")
        if not endpoint.pre_start_required:
            return
        alloc = self.pod_devices.container_allocations(uid, container).get(resource)
        if alloc is None:
            raise errors.ContainerStartError(
                f"no devices found allocated in local cache for pod {uid}, container {container}, resource {resource}"
            )
        await endpoint.pre_start_container(alloc.ids, deadline_s=self.pre_start_timeout)

    # ----- views -----------------------------------------------------------------------------

    def container_allocations(self, uid: str, container: str) -> dict[str, Allocation]:
        return self.pod_devices.container_allocations(uid, container)

    def resource_status(self) -> dict[str, dict[str, object]]:
        """Capacity, allocatable, devices, allocations and endpoint of every resource the node reports."""
        now = self._clock()
        names = sorted(set(self.resources) | self.removed | set(self.endpoints))
        out: dict[str, dict[str, object]] = {}
        for name in names:
            state = self.resources.get(name, ResourceDevices())
            endpoint = self.endpoints.get(name)
            devices = [
                {
                    "id": d.id,
                    "health": constants.HEALTHY if d.id in state.healthy else constants.UNHEALTHY,
                    "numa": list(d.numa_nodes),
                }
                for d in state.all.values()
            ]
            out[name] = {
                "capacity": state.capacity,
                "allocatable": state.allocatable,
                "devices": devices,
                "allocated": state.ordered(self.pod_devices.devices().get(name, set())),
                "removed": name in self.removed,
                "registrations": self.registrations.get(name, 0),
                "endpoint": None if endpoint is None else _endpoint_status(endpoint, now),
            }
        return out


def _endpoint_status(endpoint: Endpoint, now: float) -> dict[str, object]:
    options = endpoint.options
    return {
        "socket": str(endpoint.client.socket_path) if endpoint.client else None,
        "client": endpoint.client.id if endpoint.client else None,
        "stopped": endpoint.stopped,
        "stopped_for_s": None if endpoint.stopped_at is None else round(now - endpoint.stopped_at, 3),
        "registered_at": endpoint.registered_at,
        "options": None
        if options is None
        else {
            "pre_start_required": options.pre_start_required,
            "get_preferred_allocation_available": options.get_preferred_allocation_available,
        },
    }
