"""events.k8s.io/v1 Events as a view of core/v1 Events: one stored object, two shapes, as on the real server.

Owns the field mapping between the two (``regarding`` = ``involvedObject``, ``note`` = ``message``,
``reportingController`` = ``reportingComponent``, ``deprecated*`` = the legacy fields), the v1 field-selector
names, and the stricter validation the real server applies to Events created through events.k8s.io/v1.
Pure: no store, no HTTP.
"""

from __future__ import annotations

from typing import Any

from .status import bad_request, invalid

API_VERSION = "events.k8s.io/v1"

#: events.k8s.io/v1 field -> core/v1 field
_TO_CORE = {
    "eventTime": "eventTime",
    "series": "series",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "action": "action",
    "reason": "reason",
    "regarding": "involvedObject",
    "related": "related",
    "note": "message",
    "type": "type",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_V1 = {core: v1 for v1, core in _TO_CORE.items()}

#: field selectors accepted on events.k8s.io/v1 and the core field each one means
FIELD_LABELS = {
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "reason": "reason",
    "type": "type",
    "reportingController": "reportingComponent",
    **{
        f"regarding.{f}": f"involvedObject.{f}"
        for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value == {}


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    core: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": event.get("metadata") or {}}
    for v1_field, core_field in _TO_CORE.items():
        if not _empty(event.get(v1_field)):
            core[core_field] = event[v1_field]
    return core


def to_v1(core: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Event", "metadata": core.get("metadata") or {}}
    for core_field, v1_field in _TO_V1.items():
        if not _empty(core.get(core_field)):
            event[v1_field] = core[core_field]
    return event


def validate_create(event: dict[str, Any]) -> None:
    """What the real server requires of an Event created through events.k8s.io/v1."""
    name = (event.get("metadata") or {}).get("name") or ""
    causes = [
        (field, "FieldValueRequired", "Required value")
        for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason")
        if _empty(event.get(field))
    ]
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(("type", "FieldValueInvalid", f'Invalid value: "{event.get("type") or ""}": has invalid value'))
    if len(str(event.get("note") or "").encode()) > 1024:
        causes.append(("note", "FieldValueTooLong", "Too long: may not be more than 1024 bytes"))
    series = event.get("series")
    if series is not None and (int(series.get("count") or 0) < 2 or not series.get("lastObservedTime")):
        causes.append(("series", "FieldValueInvalid", "Invalid value: should be at least 2 with a lastObservedTime"))
    if causes:
        raise invalid("Event", "events.k8s.io", name, causes)


def core_field_selector(text: str | None) -> str | None:
    """A v1 field selector in the core field names the store filters on; an unknown field is 400."""
    if not text:
        return text
    parts = []
    for raw in text.split(","):
        part = raw.strip()
        symbol = next((s for s in ("!=", "==", "=") if s in part), None)
        if symbol is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        key, _, value = part.partition(symbol)
        core = FIELD_LABELS.get(key.strip())
        if core is None:
            raise bad_request(
                f'"{key.strip()}" is not a known field selector: only "' + '", "'.join(FIELD_LABELS) + '"'
            )
        parts.append(f"{core}{symbol}{value}")
    return ",".join(parts)
