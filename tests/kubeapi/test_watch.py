"""Watches as kube-apiserver serves them: from a resourceVersion, initial state, selectors, bookmarks,
timeoutSeconds, 410 Gone after compaction, and streams ended by the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from tests.kubeapi.fixture import KubeEnv
from tests.polling import eventually

pytestmark = pytest.mark.live_scheduler


async def _collect(stream: Any, until: Any, within: float = 10.0) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    async def run() -> None:
        async for event_type, obj in stream:
            seen.append((event_type, obj.metadata.name))
            if until(seen):
                return

    await asyncio.wait_for(run(), within)
    return seen


async def test_watch_from_a_resource_version_gets_every_later_change_in_order(kube: KubeEnv) -> None:
    client = kube.async_client()
    await client.create(ConfigMap(metadata=ObjectMeta(name="before")))
    listing = client.list(ConfigMap)
    _ = [c async for c in listing]
    await client.create(ConfigMap(metadata=ObjectMeta(name="w1")))
    await client.patch(ConfigMap, "w1", {"data": {"k": "v"}})
    await client.delete(ConfigMap, "w1")
    seen = await _collect(
        client.watch(ConfigMap, resource_version=listing.resourceVersion), lambda s: ("DELETED", "w1") in s
    )
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    await client.close()


async def test_watch_without_a_resource_version_starts_with_what_exists(kube: KubeEnv) -> None:
    client = kube.async_client()
    await client.create(ConfigMap(metadata=ObjectMeta(name="exists")))
    seen = await _collect(client.watch(ConfigMap), lambda s: ("ADDED", "exists") in s)
    assert ("ADDED", "exists") in seen
    await client.close()


async def test_watch_sees_writes_made_while_it_is_open(kube: KubeEnv) -> None:
    client = kube.async_client()
    listing = client.list(ConfigMap)
    _ = [c async for c in listing]
    task = asyncio.create_task(
        _collect(client.watch(ConfigMap, resource_version=listing.resourceVersion), lambda s: ("ADDED", "live") in s)
    )
    writer = kube.async_client()
    await writer.create(ConfigMap(metadata=ObjectMeta(name="live")))
    assert ("ADDED", "live") in await task
    await client.close()
    await writer.close()


async def test_watch_with_a_label_selector_turns_leaving_into_deleted_and_joining_into_added(kube: KubeEnv) -> None:
    client = kube.async_client()
    listing = client.list(ConfigMap)
    _ = [c async for c in listing]
    await client.create(ConfigMap(metadata=ObjectMeta(name="sel", labels={"team": "a"})))
    await client.patch(ConfigMap, "sel", {"metadata": {"labels": {"team": "b"}}})
    await client.patch(ConfigMap, "sel", {"metadata": {"labels": {"team": "a"}}})
    seen = await _collect(
        client.watch(ConfigMap, labels={"team": "a"}, resource_version=listing.resourceVersion), lambda s: len(s) >= 3
    )
    assert seen == [("ADDED", "sel"), ("DELETED", "sel"), ("ADDED", "sel")]
    await client.close()


async def test_watch_with_a_field_selector_on_name_sees_only_that_object(kube: KubeEnv) -> None:
    client = kube.async_client()
    listing = client.list(ConfigMap)
    _ = [c async for c in listing]
    await client.create(ConfigMap(metadata=ObjectMeta(name="other")))
    await client.create(ConfigMap(metadata=ObjectMeta(name="mine")))
    seen = await _collect(
        client.watch(ConfigMap, fields={"metadata.name": "mine"}, resource_version=listing.resourceVersion),
        lambda s: len(s) >= 1,
    )
    assert seen == [("ADDED", "mine")]
    await client.close()


def _watch_lines(kube: KubeEnv, params: dict[str, str], stop: Any, within: float = 15.0) -> list[dict[str, Any]]:
    http = kube.http()
    events: list[dict[str, Any]] = []
    with http.stream(
        "GET", f"/api/v1/namespaces/{kube.namespace}/configmaps", params={"watch": "true", **params}, timeout=within
    ) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not line:
                continue
            events.append(json.loads(line))
            if stop(events):
                break
    return events


def test_bookmarks_arrive_when_allowed_and_carry_only_a_resource_version(kube: KubeEnv) -> None:
    client = kube.client()
    created = client.create(ConfigMap(metadata=ObjectMeta(name="bm")))
    # the real server sends bookmarks about once a minute; the in-process one every bookmark_interval seconds
    within = 15.0 if kube.server is not None else 90.0
    events = _watch_lines(
        kube,
        {
            "allowWatchBookmarks": "true",
            "resourceVersion": created.metadata.resourceVersion,
            "timeoutSeconds": str(int(within)),
        },
        lambda evs: any(e["type"] == "BOOKMARK" for e in evs),
        within=within + 5,
    )
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert bookmark["object"]["kind"] == "ConfigMap"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(created.metadata.resourceVersion)
    assert set(bookmark["object"]["metadata"]) == {"resourceVersion"} or "annotations" in bookmark["object"]["metadata"]


def test_no_bookmarks_without_allow_watch_bookmarks(kube: KubeEnv) -> None:
    server = kube.require_server()
    created = kube.client().create(ConfigMap(metadata=ObjectMeta(name="nobm")))
    timeout = max(1, round(server.bookmark_interval * 3))
    events = _watch_lines(
        kube,
        {"resourceVersion": created.metadata.resourceVersion, "timeoutSeconds": str(timeout)},
        lambda evs: False,
        within=timeout + 10,
    )
    assert all(e["type"] != "BOOKMARK" for e in events)


def test_timeout_seconds_ends_the_stream(kube: KubeEnv) -> None:
    created = kube.client().create(ConfigMap(metadata=ObjectMeta(name="to")))
    # the stream ends by itself (the server closes it): _watch_lines returns without a stop condition
    events = _watch_lines(
        kube, {"resourceVersion": created.metadata.resourceVersion, "timeoutSeconds": "1"}, lambda evs: False, within=30
    )
    assert all(e["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") for e in events)


def test_a_watch_from_a_compacted_version_gets_410_expired(kube: KubeEnv) -> None:
    server = kube.require_server()
    client = kube.client()
    old = client.create(ConfigMap(metadata=ObjectMeta(name="old"))).metadata.resourceVersion
    client.create(ConfigMap(metadata=ObjectMeta(name="newer")))
    server.compact()
    events = _watch_lines(kube, {"resourceVersion": old}, lambda evs: True)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {old} (")


async def test_lightkube_raises_410_for_a_compacted_version_and_a_relist_recovers(kube: KubeEnv) -> None:
    server = kube.require_server()
    client = kube.async_client()
    old = (await client.create(ConfigMap(metadata=ObjectMeta(name="c1")))).metadata.resourceVersion
    await client.create(ConfigMap(metadata=ObjectMeta(name="c1b")))
    server.compact()
    with pytest.raises(ApiError) as caught:
        await _collect(client.watch(ConfigMap, resource_version=old), lambda s: True)
    assert caught.value.status.code == 410
    listing = client.list(ConfigMap)
    names = [c.metadata.name async for c in listing]
    assert "c1" in names
    task = asyncio.create_task(
        _collect(client.watch(ConfigMap, resource_version=listing.resourceVersion), lambda s: ("ADDED", "c2") in s)
    )
    await client.create(ConfigMap(metadata=ObjectMeta(name="c2")))
    assert ("ADDED", "c2") in await task
    await client.close()


async def test_close_watches_ends_open_streams(kube: KubeEnv) -> None:
    server = kube.require_server()
    http = kube.http()
    rv = kube.client().create(ConfigMap(metadata=ObjectMeta(name="cw"))).metadata.resourceVersion

    def watch_until_closed() -> str:
        with http.stream(
            "GET",
            f"/api/v1/namespaces/{kube.namespace}/configmaps",
            params={"watch": "true", "resourceVersion": rv},
            timeout=30,
        ) as answer:
            for _ in answer.iter_lines():
                pass
        return "ended"

    task = asyncio.create_task(asyncio.to_thread(watch_until_closed))

    def closed() -> bool:
        # Close every open watch until ours has ended: a close that came before our watch was registered (the server
        # is shared, so other watches may be the ones closed) must not count.
        server.close_watches()
        return task.done()

    await eventually(closed, within=20, what="our watch to end", interval=0.05)
    assert await task == "ended"


def test_send_initial_events_lists_then_marks_the_end_with_a_bookmark(kube: KubeEnv) -> None:
    kube.client().create(ConfigMap(metadata=ObjectMeta(name="initial")))
    if kube.real:  # WatchList is a feature gate on real servers (beta since 1.32); skip where it is off
        probe = kube.http().get(
            f"/api/v1/namespaces/{kube.namespace}/configmaps",
            params={
                "watch": "true",
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "1",
            },
        )
        if probe.status_code != 200:
            pytest.skip(f"the cluster refuses sendInitialEvents ({probe.status_code})")
    events = _watch_lines(
        kube,
        {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"},
        lambda evs: any(e["type"] == "BOOKMARK" for e in evs),
    )
    assert ("ADDED", "initial") in [(e["type"], e["object"]["metadata"].get("name")) for e in events]
    end = next(e for e in events if e["type"] == "BOOKMARK")
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_a_watch_that_times_out_ends_with_a_bookmark_when_allowed(kube: KubeEnv) -> None:
    kube.require_server()  # a real server sends it shortly before the end; both give the latest resourceVersion
    created = kube.client().create(ConfigMap(metadata=ObjectMeta(name="last")))
    events = _watch_lines(
        kube,
        {"resourceVersion": created.metadata.resourceVersion, "allowWatchBookmarks": "true", "timeoutSeconds": "1"},
        lambda evs: False,
    )
    assert events and events[-1]["type"] == "BOOKMARK"


def test_watch_on_a_single_objects_path_is_a_plain_get(kube: KubeEnv) -> None:
    kube.client().create(ConfigMap(metadata=ObjectMeta(name="single")))
    answer = kube.http().get(f"/api/v1/namespaces/{kube.namespace}/configmaps/single", params={"watch": "true"})
    assert answer.status_code == 200 and answer.json()["metadata"]["name"] == "single"


async def test_a_change_queued_while_a_bookmark_is_due_is_still_delivered() -> None:
    """A bookmark never carries a version past a change the watch has not sent yet: with a bookmark due every
    millisecond and writes arriving all the while, every created object reaches the watch (the bookmark used to
    jump to the store's newest version, and the change queued meanwhile was then skipped as already sent)."""
    from lightkube import AsyncClient, KubeConfig

    from tests.kubeapi.server import KubeApiServer

    with KubeApiServer(bookmark_interval=0.001) as server:
        client = AsyncClient(config=KubeConfig.from_file(server.kubeconfig), namespace="default")
        listing = client.list(ConfigMap)
        _ = [c async for c in listing]
        request = client._client.prepare_request(
            "list",
            res=ConfigMap,
            namespace="default",
            watch=True,
            params={"resourceVersion": listing.resourceVersion, "allowWatchBookmarks": "true", "timeoutSeconds": 60},
        )
        seen: set[str] = set()

        async def watch() -> None:
            async for event_type, obj in client._client.watch(request):
                if event_type == "ADDED":
                    seen.add(obj.metadata.name)

        task = asyncio.ensure_future(watch())
        names = [f"cm-{i}" for i in range(300)]
        try:
            for name in names:
                await client.create(ConfigMap(metadata=ObjectMeta(name=name)))
            await eventually(lambda: len(seen) == len(names), within=20, what="every ConfigMap ADDED on the watch")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()
