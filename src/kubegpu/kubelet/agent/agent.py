"""The node agent inside the emulator process: one API client, the Node and pod syncs, their tasks.

Owns connecting to the API server (the kubeconfig :mod:`kubegpu.kubeconfig` loads),
the facts the Node reports about this emulated machine (boot id per start,
a machine id and system UUID derived from the node name, so several agents on
one host are distinct nodes), starting the registration, node status, lease,
pod and device-event tasks after the emulator is up, and stopping them (the
Node and its Lease stay, as when a kubelet stops; the Lease then expires).
Must not contain kubelet logic of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import platform
import uuid

from lightkube import AsyncClient, KubeConfig

from kubegpu.kubelet.agent.config import AgentConfig
from kubegpu.kubelet.agent.nodesync import NodeSync
from kubegpu.kubelet.agent.podsync import PodSync
from kubegpu.kubelet.node import Node

log = logging.getLogger(__name__)
# One line per request at INFO would drown the agent's own one-line-per-event log.
logging.getLogger("httpx2").setLevel(logging.WARNING)

#: Emulator events after which the node's device capacity or allocatable may have changed.
DEVICE_EVENTS = ("registered", "devices", "disconnected", "removed")


def node_info(node_name: str) -> dict[str, str]:
    digest = hashlib.sha256(node_name.encode()).hexdigest()
    return {
        "machineID": digest[:32],
        "systemUUID": str(uuid.UUID(digest[:32])),
        "bootID": str(uuid.uuid4()),
        "kernelVersion": platform.release(),
        "osImage": "kubegpu emulated node",
    }


class NodeAgent:
    def __init__(self, node: Node, config: AgentConfig, kubeconfig: KubeConfig) -> None:
        self.node = node
        self.config = config
        self.client = AsyncClient(config=kubeconfig, field_manager="kubegpu-kubelet")
        self.node_sync = NodeSync(self.client, node, config, node_info(config.node_name))
        self.pod_sync = PodSync(self.client, node, config)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start every task; registration retries in the background until the API answers."""
        self._tasks = [
            asyncio.create_task(self._run(), name="agent"),
            asyncio.create_task(self._device_events(), name="agent-device-events"),
        ]
        for task in self._tasks:
            task.add_done_callback(_log_failure)
        log.info("node agent started", extra={"node": self.config.node_name})

    async def _run(self) -> None:
        await self.node_sync.register()
        await asyncio.gather(self.node_sync.status_loop(), self.node_sync.lease_loop(), self.pod_sync.run())

    async def _device_events(self) -> None:
        sub = self.node.events.subscribe()
        try:
            while True:
                event = await sub.get()
                if event is None:
                    return
                if event.get("event") in DEVICE_EVENTS:
                    self.node_sync.request_update()
        finally:
            sub.close()

    def status(self) -> dict[str, object]:
        """The agent's part of ``kubegpu kubelet status``."""
        return {
            "node_name": self.config.node_name,
            "registered": self.node_sync.registered.is_set(),
            "node_uid": self.node_sync.uid,
            "pods_synced": self.pod_sync.synced.is_set(),
            "status_updates": self.node_sync.status_updates,
            "lease_renewals": self.node_sync.lease_renewals,
            **self.pod_sync.counts,
        }

    async def stop(self) -> None:
        for task in self._tasks:
            task.remove_done_callback(_log_failure)
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self.pod_sync.stop()
        with contextlib.suppress(Exception):
            await self.client.close()
        log.info("node agent stopped", extra={"node": self.config.node_name})


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("node agent task failed", extra={"task": task.get_name()}, exc_info=task.exception())
