"""What a gRPC server can do on this machine: a Go server, two trivial Python servers and `kubegpu plugin`, one client.

Issue 16 compares `kubegpu plugin` with NVIDIA's Go device plugin, whose figures were measured on another machine.
This bench times, in one run and with the same Python sync gRPC client on a unix socket (bench/node.py's
latency helper: 50 warm-up calls, then ``--calls`` timed ones), four servers of the device-plugin v1beta1
``Allocate`` (1 GPU) and ``GetPreferredAllocation`` (4 of 8) RPCs:

    go      bench/grpc_floor/main.go (grpc-go, service registered by hand, raw-bytes codec), built with
            ``go build`` into a temp dir; skipped when no ``go`` is on PATH or the build fails
    aio     a trivial ``grpc.aio`` Python server (this script with ``--serve aio``)
    sync    a trivial sync ``grpc.server`` Python server on a thread pool (``--serve sync``)
    plugin  `kubegpu plugin` on the simulated ``--machine`` against `kubegpu kubelet` (its ListAndWatch live)

The trivial servers answer like a 1-GPU envvar Allocate (``NVIDIA_VISIBLE_DEVICES`` = the IDs) and pick the
must-include then the first available IDs; they do nothing else. Servers run one after another, in
``--rounds`` rounds whose order rotates, so that the machine's noise hits all alike. Printed per server and
RPC: the median over the rounds of p50, p99 and max (ms), with the range of the max, and the server's CPU time
per call (µs; less noisy than wall time under load, though contention raises it too); per server the start
(process spawned -> it printed "serving", its socket listening; for the plugin: spawned -> registered with
every device allocatable, as bench/node.py measures it) and the load average. ``--json`` adds, as the last
line, one object with every figure. The Go toolchain on Debian: ``apt-get install golang-go
golang-google-grpc-dev`` (built in GOPATH mode over /usr/share/gocode: no module download). It prints figures
and asserts none, and writes nothing outside its temp dirs (the Go binary too is built there, never committed).
Usage: python bench/grpc_floor.py [--rounds 3] [--calls 1000] [--machine dgx-a100] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

GO_SOURCE = Path(__file__).resolve().parent / "grpc_floor"
DEBIAN_GOPATH = Path("/usr/share/gocode")
SERVERS = ("go", "aio", "sync", "plugin")
RPCS = ("allocate", "preferred")
RESOURCE = "nvidia.com/gpu"
WARM_UP = 50  # calls bench/node.py's latency helper makes before it times any


# --- the trivial Python servers (run as ``--serve aio|sync``; keep their imports to the above) ---


def allocate_response(request: Any) -> Any:
    """A 1-GPU envvar answer for each container: NVIDIA_VISIBLE_DEVICES = its IDs, comma-joined."""
    return api_pb2.AllocateResponse(
        container_responses=[
            api_pb2.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(c.devices_ids)})
            for c in request.container_requests
        ]
    )


def preferred_response(request: Any) -> Any:
    """The must-include IDs, then the available ones in order, up to the allocation size."""
    responses = []
    for c in request.container_requests:
        picked = list(dict.fromkeys([*c.must_include_deviceIDs, *c.available_deviceIDs]))[: c.allocation_size]
        responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=picked))
    return api_pb2.PreferredAllocationResponse(container_responses=responses)


class SyncServicer(api_pb2_grpc.DevicePluginServicer):
    def Allocate(self, request: Any, context: Any) -> Any:
        return allocate_response(request)

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        return preferred_response(request)


class AioServicer(api_pb2_grpc.DevicePluginServicer):
    async def Allocate(self, request: Any, context: Any) -> Any:
        return allocate_response(request)

    async def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        return preferred_response(request)


def serve_sync(socket: Path) -> None:
    server = grpc.server(futures.ThreadPoolExecutor())
    api_pb2_grpc.add_DevicePluginServicer_to_server(SyncServicer(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(constants.unix_target(socket))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print("serving", flush=True)
    stop.wait()
    server.stop(0).wait()


async def serve_aio(socket: Path) -> None:
    server = grpc.aio.server()
    api_pb2_grpc.add_DevicePluginServicer_to_server(AioServicer(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(constants.unix_target(socket))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await server.start()
    print("serving", flush=True)
    await stop.wait()
    await server.stop(0)


# --- the bench ---


def go_build(work: Path) -> tuple[Path | None, str]:
    """Build the Go server into ``work``: (binary, "") or (None, why the row is skipped)."""
    go = shutil.which("go")
    if go is None:
        return None, "skipped: no go toolchain"
    env = dict(os.environ, GO111MODULE="off")
    # GOPATH mode over Debian's packaged Go sources: grpc-go comes from golang-google-grpc-dev, not the network.
    gopath = [p for p in env.get("GOPATH", "").split(":") if p]
    if DEBIAN_GOPATH.is_dir():
        gopath.append(str(DEBIAN_GOPATH))
    if gopath:
        env["GOPATH"] = ":".join(gopath)
    binary = work / "grpc_floor"
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."], cwd=GO_SOURCE, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and not line.startswith("#")]
        return None, f"skipped: go build failed (golang-google-grpc-dev installed?): {(lines or ['no output'])[0]}"
    return binary, ""


class Spawned:
    """A server process that prints "serving" once its socket listens; ``start_ms`` is spawn -> that line."""

    def __init__(self, args: list[str], socket: Path) -> None:
        self.socket = socket
        log = socket.with_suffix(".log")
        with log.open("wb") as err:
            started = time.perf_counter()
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the server says it listens, or exits
        self.start_ms = (time.perf_counter() - started) * 1000
        if line.strip() != b"serving":
            self.proc.kill()
            self.proc.wait()
            raise SystemExit(f"bench/grpc_floor.py: {args[0]} did not start: {log.read_text().strip()[-500:]}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


Latency = Callable[[Callable[[], object], int], tuple[float, float, float]]


def time_rpcs(
    socket: Path, pid: int, uuids: list[str], calls: int, latency: Latency, cpu_ms: Callable[[int], float]
) -> dict[str, Any]:
    """(p50, p99, max) of Allocate 1 GPU and GetPreferredAllocation 4 of 8, as bench/node.py calls them, and the
    server's CPU time per call (µs, warm-up calls included: its threads' schedstat, which counts only the time they
    ran, not the time they waited for a core)."""
    allocate = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=uuids[:1])])
    available = uuids[:8]
    preferred = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, allocation_size=len(available) // 2
            )
        ]
    )
    with grpc.insecure_channel(constants.unix_target(socket)) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        answer = stub.Allocate(allocate, timeout=10)
        if answer.container_responses[0].envs.get("NVIDIA_VISIBLE_DEVICES") != uuids[0]:
            raise SystemExit(f"bench/grpc_floor.py: the server on {socket} answered Allocate with {answer}")
        figures: dict[str, Any] = {}
        for rpc, call in (
            ("allocate", functools.partial(stub.Allocate, allocate, timeout=10)),
            ("preferred", functools.partial(stub.GetPreferredAllocation, preferred, timeout=10)),
        ):
            before = cpu_ms(pid)
            figures[rpc] = latency(call, calls)
            figures[f"{rpc}_cpu_us"] = (cpu_ms(pid) - before) * 1000 / (calls + WARM_UP)
        return figures


def _median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of each RPC's p50/p99/max, the max's range, and the start's median."""
    row: dict[str, Any] = {"start_ms": statistics.median(r["start_ms"] for r in rounds)}
    for rpc in RPCS:
        for i, name in enumerate(("p50", "p99", "max")):
            row[f"{rpc}_{name}_ms"] = statistics.median(r[rpc][i] for r in rounds)
        row[f"{rpc}_server_cpu_us"] = statistics.median(r[f"{rpc}_cpu_us"] for r in rounds)
        maxes = [r[rpc][2] for r in rounds]
        row[f"{rpc}_max_range_ms"] = [min(maxes), max(maxes)]
    return row


def _rotated(names: tuple[str, ...], by: int) -> list[str]:
    return [names[(i + by) % len(names)] for i in range(len(names))]


def run(args: argparse.Namespace, uuids: list[str]) -> dict[str, Any]:
    # bench/node.py is a script next to this one: its latency helper, bytecode step and the local node.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import node as node_bench

    from kubegpu.demo.localnode import LocalNode

    node_bench.compile_package()
    latency, cpu_ms = node_bench._latency, node_bench._cpu_ms
    load_start = os.getloadavg()[0]
    print(f"gRPC floor bench: {args.rounds} rounds x {args.calls} calls per RPC, load average {load_start:.1f}")
    here = Path(__file__).resolve()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in SERVERS}
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grpc-floor-", dir="/tmp")))
        binary, skipped = go_build(work)
        node = stack.enter_context(LocalNode(machine=args.machine))
        node.start_kubelet()
        commands = {
            "aio": [sys.executable, str(here), "--serve", "aio"],
            "sync": [sys.executable, str(here), "--serve", "sync"],
        }
        if binary is not None:
            commands["go"] = [str(binary)]
        for r in range(args.rounds):
            for name in _rotated(SERVERS, r):
                if name == "plugin":
                    started = time.perf_counter()
                    node.start_plugin()
                    node.wait_for(lambda s: s["resources"].get(RESOURCE, {}).get("allocatable") == len(uuids))
                    figures: dict[str, Any] = {"start_ms": (time.perf_counter() - started) * 1000}
                    sock, pid = node.socket_dir / "nvidia-gpu.sock", node.procs["plugin"].pid
                    figures.update(time_rpcs(sock, pid, uuids, args.calls, latency, cpu_ms))
                    node.stop("plugin")
                elif name in commands:
                    socket = work / f"{name}.sock"
                    flag = ["-socket"] if name == "go" else ["--socket"]
                    server = Spawned([*commands[name], *flag, str(socket)], socket)
                    try:
                        timed = time_rpcs(socket, server.proc.pid, uuids, args.calls, latency, cpu_ms)
                        figures = {"start_ms": server.start_ms, **timed}
                    finally:
                        server.stop()
                else:
                    continue
                results[name].append(figures)
    load_end = os.getloadavg()[0]
    rows: dict[str, Any] = {}
    for name in SERVERS:
        rows[name] = _median_row(results[name]) if results[name] else {"skipped": skipped}
    return {
        "machine": args.machine,
        "rounds": args.rounds,
        "calls": args.calls,
        "load_average_start": load_start,
        "load_average_end": load_end,
        "servers": rows,
    }


LABELS = {
    "go": "go (grpc-go 1.33)",
    "aio": "python grpc.aio",
    "sync": "python grpc sync",
    "plugin": "kubegpu plugin",
}


def report(figures: dict[str, Any]) -> Iterator[str]:
    for name in SERVERS:
        row = figures["servers"][name]
        label = f"{LABELS[name]:<20}"
        if "skipped" in row:
            yield f"{label} {row['skipped']}"
            continue
        what = "start -> registered, listed" if name == "plugin" else "start -> serving"
        yield f"{label} {what} (ms): {row['start_ms']:.1f}"
        for rpc, title in (("allocate", "Allocate 1 GPU"), ("preferred", "GetPreferredAllocation 4 of 8")):
            lo, hi = row[f"{rpc}_max_range_ms"]
            yield (
                f"{label} {title} p50/p99/max (ms): {row[f'{rpc}_p50_ms']:.2f} / {row[f'{rpc}_p99_ms']:.2f} / "
                f"{row[f'{rpc}_max_ms']:.2f}  [max {lo:.2f}-{hi:.2f}]; server CPU per call "
                f"{row[f'{rpc}_server_cpu_us']:.0f} µs"
            )
    yield f"load average at the end {figures['load_average_end']:.1f}"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=_positive, default=3, help="rounds over the servers, order rotating")
    parser.add_argument("--calls", type=_positive, default=1000, help="timed calls per RPC, server and round")
    parser.add_argument("--machine", default="dgx-a100", help="simulated machine of the plugin (its GPU IDs)")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object, last")
    parser.add_argument("--serve", choices=("aio", "sync"), help=argparse.SUPPRESS)
    parser.add_argument("--socket", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        if args.socket is None:
            parser.error("--serve needs --socket")
        if args.serve == "aio":
            asyncio.run(serve_aio(args.socket))
        else:
            serve_sync(args.socket)
        return
    from kubegpu.gpu import errors, profiles

    try:
        uuids = [g.uuid for g in profiles.load(args.machine).gpus]
    except errors.ProfileError as exc:
        parser.exit(2, f"bench/grpc_floor.py: {exc}\n")
    figures = run(args, uuids)
    for line in report(figures):
        print(line)
    if args.json:
        print(json.dumps(_rounded(figures), sort_keys=True))


if __name__ == "__main__":
    main()
