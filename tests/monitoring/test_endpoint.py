"""The HTTP endpoint over a real loopback socket: routes, keep-alive, gzip, and bad requests."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubegpu.gpu.simulated import SimulatedBackend
from kubegpu.monitoring import counters, render
from kubegpu.monitoring.collector import Collector
from kubegpu.monitoring.endpoint import Address, Endpoint, parse_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":9400", Address(None, 9400)),
        ("0.0.0.0:9400", Address("0.0.0.0", 9400)),
        ("localhost:80", Address("localhost", 80)),
        ("[::1]:9400", Address("::1", 9400)),
        ("127.0.0.1:0", Address("127.0.0.1", 0)),
    ],
    ids=["port-only", "any-v4", "name", "v6", "port-zero"],
)
def test_listen_addresses_in_go_syntax_parse(text: str, expected: Address) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9400", "must look like HOST:PORT or :PORT"),
        ("host:http", "port 'http' is not a number"),
        (":70000", "port 70000 is out of range"),
        ("::1:9400", "write an IPv6 host in brackets"),
    ],
    ids=["no-colon", "named-port", "out-of-range", "bare-v6"],
)
def test_bad_listen_addresses_are_errors_naming_the_value(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_address(text)
    assert repr(text) in str(info.value)


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[Endpoint]:
    backend = SimulatedBackend("pcie-4xt4", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), counters.parse(counters.default_text()), render.LabelOptions())
    await collector.collect_once()
    server = Endpoint(collector, Address("127.0.0.1", 0))
    await server.start()
    yield server
    await server.stop()


async def exchange(port: int, *requests: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Send requests on one connection; read one response per request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for request in requests:
            writer.write(request)
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            status = int(head[0].split(" ")[1])
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:] if h)}
            body = await reader.readexactly(int(headers["content-length"])) if not request.startswith(b"HEAD") else b""
            answers.append((status, headers, body))
    finally:
        writer.close()
    return answers


async def test_metrics_health_and_landing_page_answer(endpoint: Endpoint) -> None:
    (metrics, health, landing) = await exchange(
        endpoint.port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert metrics[0] == 200
    assert metrics[1]["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert b"DCGM_FI_DEV_GPU_TEMP{" in metrics[2]
    assert health[:1] == (200,) and health[2] == b"OK\n"
    assert landing[0] == 200 and b'href="/metrics"' in landing[2]


async def test_gzip_is_served_when_asked(endpoint: Endpoint) -> None:
    ((status, headers, body),) = await exchange(
        endpoint.port, b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert b"DCGM_FI_DEV_GPU_TEMP{" in gzip.decompress(body)


async def test_head_sends_headers_only(endpoint: Endpoint) -> None:
    ((status, headers, _),) = await exchange(endpoint.port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert status == 200 and int(headers["content-length"]) > 1000


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /nope HTTP/1.1\r\n\r\n", 404),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405),
        (b"GET /metrics?x=1 HTTP/1.1\r\n\r\n", 200),
    ],
    ids=["unknown-path", "post", "query-string"],
)
async def test_routes_answer_with_the_right_status(endpoint: Endpoint, request_bytes: bytes, status: int) -> None:
    ((got, _, _),) = await exchange(endpoint.port, request_bytes)
    assert got == status


@pytest.mark.parametrize(
    ("garbage", "status"),
    [
        (b"HELLO\r\n\r\n", 400),
        (b"GET /metrics SPDY/3\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n", 413),
        (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
    ],
    ids=["not-http", "other-protocol", "bad-header", "negative-length", "huge-body", "huge-head"],
)
async def test_a_bad_request_gets_a_4xx_and_the_server_keeps_serving(
    endpoint: Endpoint, garbage: bytes, status: int
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
    writer.write(garbage)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert answer.startswith(f"HTTP/1.1 {status} ".encode())
    ((ok, _, _),) = await exchange(endpoint.port, b"GET /health HTTP/1.1\r\n\r\n")
    assert ok == 200


async def test_connection_close_is_honoured(endpoint: Endpoint) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
    writer.write(b"GET /health HTTP/1.0\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=10)  # returns only when the server closes
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"OK\n")


async def test_health_is_503_naming_the_problem_until_a_collection_succeeds(tmp_path: Path) -> None:
    backend = SimulatedBackend("pcie-4xt4", fault_file=tmp_path / "f.jsonl")
    collector = Collector(backend, backend.discover(), counters.parse(counters.default_text()), render.LabelOptions())
    server = Endpoint(collector, Address("127.0.0.1", 0))
    await server.start()
    try:
        ((status, _, body),) = await exchange(server.port, b"GET /health HTTP/1.1\r\n\r\n")
        assert (status, body) == (503, b"no collection yet\n")
        await collector.collect_once()
        ((status, _, body),) = await exchange(server.port, b"GET /health HTTP/1.1\r\n\r\n")
        assert (status, body) == (200, b"OK\n")
    finally:
        await server.stop()
