"""Informers against an API server: list + watch, reconnect after errors, relist on 410 Gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from kubegpu.scheduling.live.informers import Informer
from tests.kubeapi.fixture import KubeEnv
from tests.polling import eventually

from .cluster import pod_manifest

pytestmark = pytest.mark.live_scheduler


async def test_a_lost_watch_with_a_compacted_version_relists_and_reports_what_went(kube: KubeEnv) -> None:
    server = kube.require_server()
    client = kube.async_client()
    sync = kube.client()
    sync.create(Pod.from_dict(pod_manifest(kube, "a", "nobody")))
    seen: list[tuple[str, str]] = []

    def handler(kind: str, obj: Any) -> None:
        seen.append((kind, obj.metadata.name))

    informer = Informer(client, Pod, handler, fields={"metadata.namespace": kube.namespace})
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 20)
        assert seen == [("ADDED", "a")] and informer.relists == 1
        sync.create(Pod.from_dict(pod_manifest(kube, "b", "nobody")))
        await eventually(lambda: ("ADDED", "b") in seen, within=20, what="b seen through the watch")
        # The watch breaks and cannot come back while the pod is deleted and the history compacted.
        server.fail_next(10_000, status=500, resource="pods", verb="watch")
        server.close_watches()
        sync.delete(Pod, "a", namespace=kube.namespace)
        sync.create(Pod.from_dict(pod_manifest(kube, "c", "nobody")))
        server.compact()
        server.faults.clear()
        await eventually(lambda: informer.relists == 2, within=30, what="a relist after 410 Gone")
        assert ("DELETED", "a") in seen and ("ADDED", "c") in seen
        assert sorted(k.split("/")[1] for k in informer.store) == ["b", "c"]
        sync.create(Pod.from_dict(pod_manifest(kube, "d", "nobody")))
        await eventually(lambda: ("ADDED", "d") in seen, within=20, what="watching again after the relist")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
