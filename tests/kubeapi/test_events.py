"""Events: core/v1 Events as schedulers and kubelets write them, selected by the fields they are listed with."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.resources.core_v1 import Event
from lightkube.resources.events_v1 import Event as EventV1

from tests.kubeapi.fixture import KubeEnv

pytestmark = pytest.mark.live_scheduler


def _event(kube: KubeEnv, name: str, pod: str, reason: str, kind: str = "Normal", count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": kube.namespace},
        "involvedObject": {"kind": "Pod", "namespace": kube.namespace, "name": pod, "apiVersion": "v1"},
        "reason": reason,
        "message": f"{reason} {pod}",
        "type": kind,
        "count": count,
        "source": {"component": "gpu-scheduler"},
        "reportingComponent": "gpu-scheduler",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }


def test_events_are_listed_by_involved_object_and_reason(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(Event.from_dict(_event(kube, "e1", "p1", "Scheduled")))
    client.create(Event.from_dict(_event(kube, "e2", "p2", "FailedScheduling", "Warning")))
    client.create(Event.from_dict(_event(kube, "e3", "p2", "Scheduled")))

    def names(**fields: str) -> set[str]:
        return {e.metadata.name for e in client.list(Event, fields=fields)}

    assert names(**{"involvedObject.name": "p2"}) == {"e2", "e3"}
    assert names(**{"reason": "FailedScheduling"}) == {"e2"}
    assert names(**{"involvedObject.name": "p2", "type": "Normal"}) == {"e3"}
    assert names(**{"source": "gpu-scheduler", "involvedObject.kind": "Pod"}) == {"e1", "e2", "e3"}


def test_an_aggregated_event_is_updated_in_place(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(Event.from_dict(_event(kube, "agg", "p", "FailedScheduling", "Warning")))
    client.patch(Event, "agg", {"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"})
    event = client.get(Event, "agg")
    assert event.count == 2 and event.reason == "FailedScheduling"


def test_events_k8s_io_v1_events_are_served(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(
        EventV1.from_dict(
            {
                "metadata": {"name": "new-style"},
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "kubegpu.io/scheduler",
                "reportingInstance": "a",
                "action": "Binding",
                "reason": "Scheduled",
                "type": "Normal",
                "note": "assigned",
                "regarding": {"kind": "Pod", "namespace": kube.namespace, "name": "p"},
            }
        )
    )
    assert client.get(EventV1, "new-style").note == "assigned"


def test_an_event_about_an_object_in_another_namespace_is_422(kube: KubeEnv) -> None:
    from lightkube import ApiError

    body = _event(kube, "stray", "p", "Scheduled")
    body["involvedObject"]["namespace"] = "elsewhere"
    with pytest.raises(ApiError) as caught:
        kube.client().create(Event.from_dict(body))
    assert caught.value.status.code == 422


def _v1_event(kube: KubeEnv, name: str, pod: str, **extra: Any) -> EventV1:
    return EventV1.from_dict(
        {
            "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "kubegpu-scheduler",
            "reportingInstance": "kubegpu-scheduler-a",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "note": f"Successfully assigned {kube.namespace}/{pod} to n1",
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": kube.namespace, "name": pod},
            **extra,
        }
    )


def test_an_events_k8s_io_event_is_the_same_object_as_a_core_event(kube: KubeEnv) -> None:
    client = kube.client()
    client.create(_v1_event(kube, "both", "p1"))
    core = client.get(Event, "both")
    assert core.involvedObject.name == "p1" and core.reason == "Scheduled"
    assert core.message == f"Successfully assigned {kube.namespace}/p1 to n1"
    assert core.reportingComponent == "kubegpu-scheduler"
    assert {e.metadata.name for e in client.list(Event, fields={"involvedObject.name": "p1"})} == {"both"}
    assert {e.metadata.name for e in client.list(EventV1, fields={"regarding.name": "p1"})} == {"both"}


def test_an_events_k8s_io_series_update_is_seen_through_both_apis(kube: KubeEnv) -> None:
    from lightkube.types import PatchType

    client = kube.client()
    client.create(_v1_event(kube, "series", "p2"))
    client.patch(
        EventV1,
        "series",
        {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}},
        patch_type=PatchType.MERGE,
    )
    assert client.get(EventV1, "series").series.count == 2
    assert client.get(Event, "series").series.count == 2


def test_an_events_k8s_io_event_without_its_required_fields_is_422(kube: KubeEnv) -> None:
    # lightkube's model refuses a missing eventTime itself, so this one goes raw
    answer = kube.http().post(
        f"/apis/events.k8s.io/v1/namespaces/{kube.namespace}/events",
        json={
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "bare"},
            "reason": "Scheduled",
            "type": "Normal",
            "regarding": {"kind": "Pod", "namespace": kube.namespace, "name": "p"},
        },
    )
    assert answer.status_code == 422 and answer.json()["reason"] == "Invalid"
    for field in ("eventTime", "reportingController", "reportingInstance", "action"):
        assert field in answer.json()["message"]


async def test_events_k8s_io_events_can_be_watched(kube: KubeEnv) -> None:
    import asyncio

    client = kube.async_client()
    listing = client.list(EventV1)
    _ = [e async for e in listing]
    await client.create(_v1_event(kube, "watched", "p3"))
    seen = []

    async def run() -> None:
        async for event_type, obj in client.watch(EventV1, resource_version=listing.resourceVersion):
            seen.append((event_type, obj.metadata.name, obj.note))
            return

    await asyncio.wait_for(run(), 10)
    assert seen == [("ADDED", "watched", f"Successfully assigned {kube.namespace}/p3 to n1")]
    await client.close()


def test_a_core_event_with_an_event_time_needs_its_reporter_and_action(kube: KubeEnv) -> None:
    from lightkube import ApiError

    body = _event(kube, "newstyle", "p", "Scheduled")
    body["eventTime"] = "2026-01-01T00:00:00.000000Z"
    body.pop("reportingComponent")
    with pytest.raises(ApiError) as caught:
        kube.client().create(Event.from_dict(body))
    assert caught.value.status.code == 422
    assert "reportingComponent" in caught.value.status.message and "action" in caught.value.status.message
