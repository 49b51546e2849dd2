"""The control API over its real unix socket: requests, errors that never stop the daemon, event streams."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kubegpu.kubelet import client, errors
from kubegpu.kubelet.daemon import Daemon
from tests.kubelet.conftest import StubFactory, capacity
from tests.polling import eventually

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"containers": [{"name": "main", "resources": {"limits": {"example.com/gpu": 2}}}]},
}


async def exchange(socket_dir: Path, *lines: bytes) -> list[dict[str, Any]]:
    reader, writer = await asyncio.open_unix_connection(str(client.control_socket(socket_dir)))
    answers = []
    try:
        for line in lines:
            writer.write(line)
            await writer.drain()
            answers.append(json.loads(await reader.readline()))
    finally:
        writer.close()
    return answers


async def test_garbage_gets_an_error_answer_and_the_connection_keeps_working(emulator: Daemon) -> None:
    answers = await exchange(
        emulator.socket_dir, b"{not json\n", b"[1]\n", b'{"op": "launch"}\n', b'{"op": "delete"}\n', b'{"op": "ping"}\n'
    )
    assert [a["ok"] for a in answers] == [False, False, False, False, True]
    assert [a["error"]["reason"] for a in answers[:4]] == ["BadRequest"] * 4
    assert "unknown op 'launch'" in answers[2]["error"]["message"]


async def test_an_invalid_manifest_is_a_bad_request_naming_the_field(emulator: Daemon) -> None:
    bad = {**POD, "spec": {"containers": [{"name": "main", "resources": {"limits": {"example.com/gpu": "1.5"}}}]}}
    (answer,) = await exchange(emulator.socket_dir, json.dumps({"op": "admit", "pod": bad}).encode() + b"\n")
    assert answer["error"]["reason"] == "BadRequest"
    assert "spec.containers[0].resources.limits[example.com/gpu]" in answer["error"]["message"]


async def test_the_sync_client_admits_reads_status_and_deletes(emulator: Daemon, start_stub: StubFactory) -> None:
    await start_stub()
    await eventually(lambda: capacity(emulator) == (4, 4))
    d = emulator.socket_dir
    result = await asyncio.to_thread(client.admit, POD, d)
    assert set(result["containers"]["main"]) >= {"envs", "mounts", "devices", "annotations", "cdi_devices"}
    status = await asyncio.to_thread(client.status, d)
    assert status["resources"]["example.com/gpu"]["capacity"] == 4
    assert status["resources"]["example.com/gpu"]["devices"][0] == {"id": "dev-0", "health": "Healthy", "numa": []}
    assert status["pods"] == [
        {
            "namespace": "ml",
            "name": "train",
            "uid": result["pod"]["uid"],
            "containers": {"main": {"example.com/gpu": ["dev-0", "dev-1"]}},
        }
    ]
    freed = await asyncio.to_thread(client.delete, "ml/train", d)
    assert freed["freed"] == {"main": {"example.com/gpu": ["dev-0", "dev-1"]}}
    with pytest.raises(errors.ControlError) as exc:
        await asyncio.to_thread(client.delete, "ml/train", d)
    assert exc.value.reason == "NotFound"


async def test_a_rejection_reaches_the_client_with_reason_and_message(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    await start_stub()
    await eventually(lambda: capacity(emulator) == (4, 4))
    big = {**POD, "spec": {"containers": [{"name": "main", "resources": {"limits": {"example.com/gpu": 9}}}]}}
    with pytest.raises(errors.ControlError) as exc:
        await client.async_admit(big, emulator.socket_dir)
    assert exc.value.reason == "UnexpectedAdmissionError"
    assert "Requested: 9, Available: 4" in exc.value.message
    assert not exc.value.is_bad_input


async def test_watch_streams_a_snapshot_then_each_change_with_its_time(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    events = client.async_watch(emulator.socket_dir)
    hello = await anext(events)
    assert hello["event"] == "snapshot" and hello["status"]["resources"] == {}
    stub = await start_stub()
    kinds = []
    async with asyncio.timeout(15):
        async for event in events:
            kinds.append(event["event"])
            if event["event"] == "devices":
                assert event["healthy"] == ["dev-0", "dev-1", "dev-2", "dev-3"]
                break
    before = asyncio.get_running_loop().time()
    stub.set_health("dev-2", "Unhealthy")
    async with asyncio.timeout(15):
        event = await anext(events)
    assert event["event"] == "devices" and event["unhealthy"] == ["dev-2"]
    assert event["status"]["resources"]["example.com/gpu"]["allocatable"] == 3
    assert isinstance(event["ts"], float) and event["seq"] > hello["seq"]
    assert asyncio.get_running_loop().time() - before < 15
    await events.aclose()
    assert kinds == ["registered", "devices"]


async def test_wait_for_returns_the_first_status_that_matches(emulator: Daemon, start_stub: StubFactory) -> None:
    waiter = asyncio.create_task(
        client.async_wait_for(
            lambda s: s["resources"].get("example.com/gpu", {}).get("allocatable") == 4, emulator.socket_dir
        )
    )
    done, _ = await asyncio.wait({waiter}, timeout=0.1)
    assert not done  # no status matches before the plugin is there
    await start_stub()
    status = await waiter
    assert status["resources"]["example.com/gpu"]["capacity"] == 4
    sync_status = await asyncio.to_thread(
        client.wait_for, lambda s: "example.com/gpu" in s["resources"], emulator.socket_dir, 10.0
    )
    assert sync_status["resources"]["example.com/gpu"]["allocatable"] == 4


async def test_wait_for_times_out_naming_the_last_state(emulator: Daemon) -> None:
    with pytest.raises(TimeoutError, match="no resources"):
        await client.async_wait_for(lambda s: False, emulator.socket_dir, within=0.3)


def test_no_emulator_is_a_clear_unavailable_error(tmp_path: Path) -> None:
    with pytest.raises(
        errors.KubeletUnavailable, match=re.escape(f"no kubegpu kubelet is running for socket dir {tmp_path}")
    ):
        client.status(tmp_path)
