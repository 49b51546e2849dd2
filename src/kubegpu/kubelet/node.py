"""The emulated node: pod admission, deletion and status on top of the device manager.

Owns what the kubelet does around the device manager for a pod: admission in
spec order (init containers first) through the topology manager's admit
handler and ``Allocate``, the reason and message of a rejected pod
(``UnexpectedAdmissionError``: ``Allocate failed due to <error>, which is
unexpected``; ``TopologyAffinityError``), leaving everything as it was when a
pod is rejected, container start (``PreStartContainer``, runtime options),
deletion, restoring state at start (checkpoint + pod store), and the status
report. Admissions run one at a time, as in the kubelet's sync loop. Must not
speak any wire protocol; the control and pod-resources servers call it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

from kubegpu.api import constants
from kubegpu.kubelet import checkpoint, errors, files, topology
from kubegpu.kubelet.events import EventHub
from kubegpu.kubelet.manager import DeviceManager
from kubegpu.kubelet.pod import Container, Pod
from kubegpu.kubelet.podstore import PodStore

log = logging.getLogger(__name__)

UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"


class Node:
    def __init__(
        self,
        socket_dir: Path,
        *,
        grace_period: float = constants.ENDPOINT_STOP_GRACE_PERIOD_S,
        pre_start_timeout: float = constants.PRE_START_CONTAINER_TIMEOUT_S,
        topology_policy: str = "none",
        persist_pods: bool = True,
    ) -> None:
        if topology_policy not in topology.POLICIES:
            raise ValueError(
                f"topology manager policy must be one of {', '.join(topology.POLICIES)}, got {topology_policy!r}"
            )
        self.socket_dir = socket_dir
        self.topology_policy = topology_policy
        self.events = EventHub(snapshot=self.status)
        self.pods = PodStore(files.pod_store(socket_dir) if persist_pods else None)
        self.manager = DeviceManager(
            socket_dir,
            events=self.events,
            active_pods=self.pods.uids,
            grace_period=grace_period,
            pre_start_timeout=pre_start_timeout,
        )
        #: Extra facts for the status report (sockets, pid, flags), set by the daemon.
        self.info: dict[str, object] = {}
        #: The topology manager's chosen affinity per (pod uid, container).
        self.affinities: dict[tuple[str, str], topology.Hint] = {}
        #: The node agent's report (``--kubeconfig``), shown under ``agent`` in the status; None without one.
        self.agent_status: Callable[[], dict[str, object]] | None = None
        self._lock = asyncio.Lock()

    # ----- start -----------------------------------------------------------------------------

    def restore(self) -> dict[str, object]:
        """Load the checkpoint and the pod store; allocations of pods the store does not know are dropped."""
        summary: dict[str, object] = {"checkpoint": "absent", "pods": 0, "entries": 0, "dropped": []}
        path = self.manager.checkpoint_file
        if path.exists():
            try:
                cp = checkpoint.decode(path.read_bytes())
                self.manager.restore(cp)
                summary.update(checkpoint="restored", entries=len(cp.entries), resources=sorted(cp.registered))
            except (OSError, errors.CheckpointError) as exc:
                # The kubelet logs, ignores the file and starts without allocations.
                log.warning(
                    "continue after failing to read checkpoint file; device allocation info may not be up-to-date",
                    extra={"path": str(path), "error": str(exc)},
                )
                summary["checkpoint"] = f"ignored: {exc}"
        self.pods.load()
        summary["pods"] = len(self.pods)
        known = self.pods.uids()
        dropped = [uid for uid in self.manager.pod_devices.pods() if uid not in known]
        if dropped:
            log.warning("dropping allocations of pods that were never admitted", extra={"pods": dropped})
            self.manager.pod_devices.delete(dropped)
            self.manager.allocated = self.manager.pod_devices.devices()
            summary["dropped"] = dropped
        log.info("state restored", extra={k: v for k, v in summary.items() if k != "dropped"})
        return summary

    # ----- admission -------------------------------------------------------------------------

    async def admit(self, pod: Pod) -> dict[str, object]:
        """Admit a pod and start its containers; returns each container's runtime options.

        Raises :class:`~kubegpu.kubelet.errors.ControlError`: ``UnexpectedAdmissionError`` or
        ``TopologyAffinityError`` when the pod is rejected (nothing changed),
        ``CreateContainerConfigError`` when it was admitted but a container could not start,
        ``AlreadyExists`` when its name or uid belongs to another pod.
        """
        async with self._lock:
            pod = self._identify(pod)
            manager = self.manager
            saved = manager.pod_devices.save_pod(pod.uid)
            saved_reuse = copy.deepcopy(manager.devices_to_reuse)
            saved_affinities = dict(self.affinities)
            manager.pending_pod = pod.uid
            calls = 0
            rpcs_before = manager.allocate_calls
            try:
                for container in pod.all_containers():
                    affinity = self._topology_admit(pod, container)
                    calls += await manager.allocate(pod, container, affinity)
            except BaseException as exc:
                # Whatever went wrong, a pod that is not admitted leaves no trace.
                manager.pod_devices.restore_pod(pod.uid, saved)
                manager.devices_to_reuse = saved_reuse
                manager.allocated = manager.pod_devices.devices()
                self.affinities = saved_affinities
                if manager.allocate_calls != rpcs_before:
                    # An Allocate that succeeded wrote its entry to the checkpoint: take it out again.
                    manager.write_checkpoint_logged()
                if not isinstance(exc, errors.AllocationError | errors.TopologyAffinityError):
                    raise
                if isinstance(exc, errors.TopologyAffinityError):
                    reason, message = TOPOLOGY_AFFINITY_ERROR, str(exc)
                else:
                    reason, message = UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {exc}, which is unexpected"
                log.info("pod rejected", extra={"pod": pod.key, "reason": reason, "error": message})
                raise errors.ControlError(reason, message, {"pod": _pod_ref(pod)}) from None
            finally:
                manager.pending_pod = None
            self.pods.put(pod)
            log.info("pod admitted", extra={"pod": pod.key, "uid": pod.uid, "allocate_rpcs": calls})
            self.events.publish("admitted", pod=_pod_ref(pod))
            result = await self._start_containers(pod)
            result["allocate_rpcs"] = calls
            failed = [(n, c["error"]) for n, c in result["containers"].items() if "error" in c]  # type: ignore[attr-defined]
            if failed:
                raise errors.ControlError(
                    CREATE_CONTAINER_CONFIG_ERROR, f"container {failed[0][0]}: {failed[0][1]}", result
                )
            return result

    def _identify(self, pod: Pod) -> Pod:
        same_name = self.pods.find(pod.namespace, pod.name)
        if not pod.uid:
            # A manifest without uid names the pod: admitting it again is the same pod.
            pod = pod.with_uid(same_name.uid if same_name else str(uuid.uuid4()))
        if same_name is not None and same_name.uid != pod.uid:
            raise errors.ControlError(
                "AlreadyExists", f"pod {pod.key} already exists with uid {same_name.uid}; delete it first"
            )
        same_uid = self.pods.get(pod.uid)
        if same_uid is not None and same_uid.key != pod.key:
            raise errors.ControlError("AlreadyExists", f"uid {pod.uid} already belongs to pod {same_uid.key}")
        return pod

    def _topology_admit(self, pod: Pod, container: Container) -> frozenset[int] | None:
        if self.topology_policy == "none":
            return None
        manager = self.manager
        manager.update_allocated_devices()
        nodes = self.numa_nodes()
        hints: dict[str, list[topology.Hint] | None] = {}
        for resource, requested in container.limits:
            if not manager.is_device_plugin_resource(resource):
                continue
            state = manager.resources.get(resource)
            if state is None or not state.has_topology_alignment():
                hints[resource] = None
                continue
            allocated = manager.pod_devices.container_devices(pod.uid, container.name, resource)
            if allocated:
                hints[resource] = (
                    topology.device_hints(state, nodes, allocated, (), requested) if len(allocated) == requested else []
                )
                continue
            available = state.healthy - manager.allocated.get(resource, set())
            reusable = manager.devices_to_reuse.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = topology.device_hints(
                state, nodes, state.ordered(available), state.ordered(reusable), requested
            )
        best, admit = topology.merge(self.topology_policy, nodes, hints)
        log.debug("topology hints", extra={"pod": pod.key, "container": container.name, "best": best.to_json()})
        if not admit:
            raise errors.TopologyAffinityError()
        self.affinities[(pod.uid, container.name)] = best
        return best.affinity

    def numa_nodes(self) -> list[int]:
        """The node's NUMA nodes: every node any known device lists (node 0 at least)."""
        nodes = {n for state in self.manager.resources.values() for d in state.all.values() for n in d.numa_nodes}
        return sorted(nodes | {0})

    async def _start_containers(self, pod: Pod) -> dict[str, object]:
        containers: dict[str, dict[str, object]] = {}
        blocked_by: str | None = None
        for container in pod.all_containers():
            entry: dict[str, object] = {
                "init": container.init,
                "restartable": container.restartable,
                "resources": {r: a.ids for r, a in self.manager.container_allocations(pod.uid, container.name).items()},
            }
            hint = self.affinities.get((pod.uid, container.name))
            entry["numa_affinity"] = None if hint is None or hint.affinity is None else sorted(hint.affinity)
            if blocked_by is not None:
                entry["error"] = f"not started: init container {blocked_by} could not start"
            else:
                try:
                    options = await self.manager.run_container_options(pod, container)
                    entry.update(options.to_json())
                    for conflict in options.conflicts:
                        log.error(conflict, extra={"pod": pod.key, "container": container.name})
                except errors.ContainerStartError as exc:
                    entry["error"] = str(exc)
                    log.info(
                        "container start failed", extra={"pod": pod.key, "container": container.name, "error": str(exc)}
                    )
                    if container.init:
                        # Later containers wait for this init container, which cannot start.
                        blocked_by = container.name
            containers[container.name] = entry
        return {"pod": _pod_ref(pod), "containers": containers}

    async def delete(self, namespace: str, name: str) -> dict[str, object]:
        """Delete a pod: it stops being active and its devices are released."""
        async with self._lock:
            pod = self.pods.find(namespace, name)
            if pod is None:
                raise errors.ControlError("NotFound", f"pod {namespace}/{name} not found")
            freed = {
                c: {r: a.ids for r, a in resources.items()}
                for c, resources in self.manager.pod_devices.pod_allocations(pod.uid).items()
            }
            self.pods.remove(pod.uid)
            self.manager.devices_to_reuse.pop(pod.uid, None)
            self.affinities = {k: v for k, v in self.affinities.items() if k[0] != pod.uid}
            self.manager.update_allocated_devices()
            self.manager.write_checkpoint_logged()
            log.info("pod deleted", extra={"pod": pod.key, "uid": pod.uid})
            self.events.publish("deleted", pod=_pod_ref(pod))
            return {"deleted": _pod_ref(pod), "freed": freed}

    # ----- views -----------------------------------------------------------------------------

    def status(self) -> dict[str, object]:
        pods = []
        for pod in self.pods:
            containers: dict[str, dict[str, list[str]]] = {}
            for container in pod.all_containers():
                allocs = self.manager.container_allocations(pod.uid, container.name)
                containers[container.name] = {r: a.ids for r, a in allocs.items()}
            pods.append({**_pod_ref(pod), "containers": containers})
        return {
            "resources": self.manager.resource_status(),
            "pods": pods,
            "node": {
                **self.info,
                "topology_manager_policy": self.topology_policy,
                "numa_nodes": self.numa_nodes(),
                "grace_period_s": self.manager.grace_period,
                "allocate_rpcs": self.manager.allocate_calls,
                "events": self.events.seq,
            },
            **({"agent": self.agent_status()} if self.agent_status is not None else {}),
        }


def _pod_ref(pod: Pod) -> dict[str, str]:
    return {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
