"""The device manager's checkpoint ``kubelet_internal_checkpoint``: its JSON format and checksum.

Owns encoding and decoding the file the kubelet keeps beside ``kubelet.sock``::

    {"Data": {"PodDeviceEntries": [{"PodUID": "...", "ContainerName": "...",
                                    "ResourceName": "...",
                                    "DeviceIDs": {"0": ["id", ...], "-1": [...]},
                                    "AllocResp": "<base64 of the protobuf ContainerAllocateResponse>"}],
              "RegisteredDevices": {"nvidia.com/gpu": ["healthy id", ...]}},
     "Checksum": 123}

``DeviceIDs`` is keyed by NUMA node id as a string (``"-1"``: no topology).
``RegisteredDevices`` holds each resource's *healthy* devices at write time.
Field names, nesting, key order and the ``null`` for no entries are the
kubelet's (Go ``encoding/json`` of its structs).

The checksum differs: the kubelet's is FNV-32a over a Go ``spew`` dump of
``Data``, which cannot be reproduced outside Go. Ours is FNV-1a 32-bit over the
canonical JSON of ``Data`` (keys sorted, no spaces, ASCII), stored as a
number like the kubelet's. A mismatching file is rejected as the kubelet does
(the caller logs a warning and starts empty). Pure: bytes in, bytes out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubegpu.kubelet import errors


@dataclass(frozen=True)
class Entry:
    """One ``PodDevicesEntry``: a container's devices of one resource and the plugin's cached answer."""

    pod_uid: str
    container: str
    resource: str
    #: Device IDs by NUMA node id (-1: no topology), in allocation order.
    devices: Mapping[int, Sequence[str]]
    #: The serialized ``ContainerAllocateResponse``.
    alloc_resp: bytes


@dataclass(frozen=True)
class Checkpoint:
    entries: tuple[Entry, ...] = ()
    #: Resource -> IDs of its healthy devices when written.
    registered: Mapping[str, Sequence[str]] = field(default_factory=dict)


def fnv1a32(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _data(cp: Checkpoint) -> dict[str, object]:
    entries = [
        {
            "PodUID": e.pod_uid,
            "ContainerName": e.container,
            "ResourceName": e.resource,
            # Go encodes map keys as strings and sorts them as strings ("-1" < "0" < "10" < "2").
            "DeviceIDs": {str(k): list(e.devices[k]) for k in sorted(e.devices, key=str)},
            "AllocResp": base64.b64encode(e.alloc_resp).decode("ascii"),
        }
        for e in cp.entries
    ]
    return {
        # A nil Go slice encodes as null: the kubelet writes null when no pod holds devices.
        "PodDeviceEntries": entries or None,
        "RegisteredDevices": {name: list(ids) for name, ids in sorted(cp.registered.items())},
    }


def checksum(data: Mapping[str, object]) -> int:
    """Our checksum of a checkpoint's ``Data`` object (see the module docstring)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return fnv1a32(canonical.encode("ascii"))


def encode(cp: Checkpoint) -> bytes:
    """The file's bytes: compact JSON, fields in the kubelet's order."""
    data = _data(cp)
    return json.dumps({"Data": data, "Checksum": checksum(data)}, separators=(",", ":")).encode()


def decode(raw: bytes) -> Checkpoint:
    """Parse and verify a checkpoint; raises :class:`~kubegpu.kubelet.errors.CheckpointError`."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.CheckpointError(f"checkpoint is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("Data"), dict):
        raise errors.CheckpointError('checkpoint has no "Data" object')
    data = doc["Data"]
    stored = doc.get("Checksum")
    if checksum(data) != stored:
        raise errors.CheckpointError("checkpoint is corrupted: checksum mismatch")
    try:
        entries = tuple(_entry(e) for e in data.get("PodDeviceEntries") or ())
        registered_raw = data.get("RegisteredDevices") or {}
        if not isinstance(registered_raw, dict):
            raise TypeError("RegisteredDevices is not an object")
        registered = {str(k): [str(d) for d in (v or ())] for k, v in registered_raw.items()}
    except (TypeError, ValueError, KeyError, binascii.Error) as exc:
        raise errors.CheckpointError(f"checkpoint entry is malformed: {exc}") from None
    return Checkpoint(entries, registered)


def _entry(raw: object) -> Entry:
    if not isinstance(raw, dict):
        raise TypeError("a PodDeviceEntries item is not an object")
    devices = {int(k): [str(d) for d in v or ()] for k, v in (raw.get("DeviceIDs") or {}).items()}
    return Entry(
        pod_uid=str(raw["PodUID"]),
        container=str(raw["ContainerName"]),
        resource=str(raw["ResourceName"]),
        devices=devices,
        alloc_resp=base64.b64decode(raw.get("AllocResp") or "", validate=True),
    )
