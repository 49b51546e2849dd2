"""The checkpoint file: the kubelet's JSON shape, our checksum, and rejection of damaged files."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet import checkpoint, errors

RESP = api_pb2.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": "GPU-1"}).SerializeToString()


def sample() -> checkpoint.Checkpoint:
    return checkpoint.Checkpoint(
        entries=(checkpoint.Entry("uid-1", "main", "nvidia.com/gpu", {10: ["g10"], -1: ["x"], 2: ["g2", "g3"]}, RESP),),
        registered={"nvidia.com/gpu": ["g2", "g3", "g10"], "example.com/a": []},
    )


def test_the_file_has_the_kubelets_field_names_and_nesting() -> None:
    doc = json.loads(checkpoint.encode(sample()))
    assert list(doc) == ["Data", "Checksum"]
    assert list(doc["Data"]) == ["PodDeviceEntries", "RegisteredDevices"]
    entry = doc["Data"]["PodDeviceEntries"][0]
    assert list(entry) == ["PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"]
    # NUMA ids are string keys, sorted as strings like Go's encoding/json does.
    assert list(entry["DeviceIDs"]) == ["-1", "10", "2"]
    assert (
        api_pb2.ContainerAllocateResponse.FromString(base64.b64decode(entry["AllocResp"])).envs[
            "NVIDIA_VISIBLE_DEVICES"
        ]
        == "GPU-1"
    )
    assert doc["Data"]["RegisteredDevices"] == {"example.com/a": [], "nvidia.com/gpu": ["g2", "g3", "g10"]}
    assert isinstance(doc["Checksum"], int)


def test_no_entries_encode_as_null_like_a_nil_go_slice_and_read_back_empty() -> None:
    raw = checkpoint.encode(checkpoint.Checkpoint())
    assert json.loads(raw)["Data"]["PodDeviceEntries"] is None
    assert checkpoint.decode(raw) == checkpoint.Checkpoint()


def test_the_checksum_is_fnv1a32_of_the_canonical_data() -> None:
    doc = json.loads(checkpoint.encode(sample()))
    canonical = json.dumps(doc["Data"], sort_keys=True, separators=(",", ":")).encode()
    assert doc["Checksum"] == checkpoint.fnv1a32(canonical)
    assert checkpoint.fnv1a32(b"") == 0x811C9DC5
    assert checkpoint.fnv1a32(b"a") == 0xE40C292C


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["Data"]["RegisteredDevices"].update({"x/y": ["z"]}), "checksum mismatch"),
        (lambda d: d.update({"Checksum": d["Checksum"] + 1}), "checksum mismatch"),
        (lambda d: d.pop("Data"), 'no "Data" object'),
    ],
    ids=["hand-edited-data", "wrong-checksum", "no-data"],
)
def test_a_damaged_file_is_rejected(mutate: object, message: str) -> None:
    doc = json.loads(checkpoint.encode(sample()))
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(errors.CheckpointError, match=message):
        checkpoint.decode(json.dumps(doc).encode())


def test_garbage_is_rejected_as_not_json() -> None:
    with pytest.raises(errors.CheckpointError, match="not JSON"):
        checkpoint.decode(b"\x00{not json")


ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@given(
    entries=st.lists(
        st.builds(
            checkpoint.Entry,
            pod_uid=ids,
            container=ids,
            resource=ids,
            devices=st.dictionaries(st.integers(-1, 7), st.lists(ids, min_size=1, max_size=4), min_size=1, max_size=3),
            alloc_resp=st.binary(max_size=40),
        ),
        max_size=5,
    ),
    registered=st.dictionaries(ids, st.lists(ids, max_size=4), max_size=3),
)
def test_encode_then_decode_gives_the_same_checkpoint(
    entries: list[checkpoint.Entry], registered: dict[str, list[str]]
) -> None:
    cp = checkpoint.Checkpoint(tuple(entries), registered)
    again = checkpoint.decode(checkpoint.encode(cp))
    assert again.entries == tuple(
        checkpoint.Entry(e.pod_uid, e.container, e.resource, {k: list(v) for k, v in e.devices.items()}, e.alloc_resp)
        for e in entries
    )
    assert dict(again.registered) == {k: list(v) for k, v in registered.items()}
