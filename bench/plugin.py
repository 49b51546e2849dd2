"""Benchmark ``kubegpu plugin``: registration, re-registration, fault-to-Unhealthy, Allocate latency, memory.

Runs the plugin as a real process on a simulated DGX A100 against a minimal kubelet written here (the
Registration service on kubelet.sock; inside Register it dials the plugin and asks its options, then
opens ListAndWatch, as kubelet 1.32 does), so the figures are the plugin's own, without the emulator's
bookkeeping. Every RPC is real gRPC over unix sockets.

Prints plain lines ``plugin <what> <value>``. Targets (issue 2): start -> registered <= 1000 ms,
kubelet.sock re-created -> re-registered <= 500 ms, fault -> kubelet sees Unhealthy <= 100 ms,
Allocate p99 <= 2 ms, RSS <= 50 MiB. Then a mixed-MIG A100 node (6 resources, 6 sockets) with the metrics
endpoint on: start -> every resource registered, and RSS.

    python bench/plugin.py [--calls 1000] [--faults 20] [--restarts 10]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.gpu import faults, profiles
from kubegpu.localnode import free_port

UUIDS = [g.uuid for g in profiles.load("dgx-a100").gpus]


class Kubelet(api_pb2_grpc.RegistrationServicer):
    """Just enough kubelet: accept Register, dial the plugin, follow its ListAndWatch."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "kubelet.sock"
        self.registered: asyncio.Queue[float] = asyncio.Queue()
        self.health: dict[str, str] = {}
        self.changed = asyncio.Event()
        self.server: grpc.aio.Server | None = None
        self.channels: dict[str, grpc.aio.Channel] = {}
        self.watches: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> float:
        self.server = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        self.server.add_insecure_port(constants.unix_target(self.socket))
        await self.server.start()
        return time.perf_counter()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(0)
        self.socket.unlink(missing_ok=True)

    async def Register(self, request: api_pb2.RegisterRequest, context: grpc.aio.ServicerContext) -> api_pb2.Empty:
        name = request.resource_name
        if name in self.watches:
            self.watches.pop(name).cancel()
        if name in self.channels:
            await self.channels.pop(name).close()
        channel = grpc.aio.insecure_channel(constants.unix_target(self.directory / request.endpoint))
        self.channels[name] = channel
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=10, wait_for_ready=True)
        self.watches[name] = asyncio.create_task(self._follow(stub))
        self.registered.put_nowait(time.perf_counter())
        return api_pb2.Empty()

    async def close(self) -> None:
        for task in self.watches.values():
            task.cancel()
        for channel in self.channels.values():
            await channel.close()
        self.watches.clear()
        self.channels.clear()
        await self.stop()

    async def _follow(self, stub: api_pb2_grpc.DevicePluginStub) -> None:
        async for response in stub.ListAndWatch(api_pb2.Empty()):
            self.health = {d.ID: d.health for d in response.devices}
            self.changed.set()

    async def until_health(self, device: str, health: str) -> float:
        while self.health.get(device) != health:
            self.changed.clear()
            await self.changed.wait()
        return time.perf_counter()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench(calls: int, fault_rounds: int, restarts: int, starts: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="kg-bench-", dir="/tmp"))
    fault_file = directory / "faults.jsonl"
    kubelet = Kubelet(directory)
    await kubelet.start()
    command = [sys.executable, "-m", "kubegpu", "--log-level", "warning", "plugin", "--machine", "dgx-a100"]
    command += ["--kubelet-socket", str(kubelet.socket), "--fault-file", str(fault_file)]
    command += ["--health-recovery-quiet-period", "0"]
    process: asyncio.subprocess.Process | None = None
    try:
        start_ms = []
        for _ in range(starts):
            if process is not None:
                process.terminate()
                await process.wait()
            began = time.perf_counter()
            process = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
            )
            start_ms.append((await asyncio.wait_for(kubelet.registered.get(), 30) - began) * 1000)
        print(f"plugin start_to_registered_ms_median {statistics.median(start_ms):.1f}")
        print(f"plugin start_to_registered_ms_max {max(start_ms):.1f}")
        assert process is not None

        again_ms = []
        for _ in range(restarts):
            await kubelet.stop()
            created = await kubelet.start()
            again_ms.append((await asyncio.wait_for(kubelet.registered.get(), 30) - created) * 1000)
        print(f"plugin kubelet_recreated_to_reregistered_ms_median {statistics.median(again_ms):.1f}")
        print(f"plugin kubelet_recreated_to_reregistered_ms_max {max(again_ms):.1f}")

        await asyncio.wait_for(kubelet.until_health(UUIDS[2], "Healthy"), 30)
        fault_ms = []
        for round_ in range(fault_rounds):
            gpu = round_ % 8
            injected = time.perf_counter()
            faults.append(fault_file, faults.Fault(kind="xid", gpu=gpu, xid=79))
            seen = await asyncio.wait_for(kubelet.until_health(UUIDS[gpu], "Unhealthy"), 30)
            fault_ms.append((seen - injected) * 1000)
            faults.append(fault_file, faults.Fault(kind="recover", gpu=gpu))
            await asyncio.wait_for(kubelet.until_health(UUIDS[gpu], "Healthy"), 30)
        print(f"plugin fault_to_unhealthy_ms_median {statistics.median(fault_ms):.1f}")
        print(f"plugin fault_to_unhealthy_ms_max {max(fault_ms):.1f}")

        async with grpc.aio.insecure_channel(constants.unix_target(directory / "nvidia-gpu.sock")) as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            for count in (1, 8):
                request = api_pb2.AllocateRequest(
                    container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=UUIDS[:count])]
                )
                for _ in range(50):  # warm the channel and the server
                    await stub.Allocate(request, timeout=10)
                took = []
                for _ in range(calls):
                    began = time.perf_counter()
                    await stub.Allocate(request, timeout=10)
                    took.append((time.perf_counter() - began) * 1000)
                print(f"plugin allocate_{count}gpu_ms_p50 {percentile(took, 50):.3f}")
                print(f"plugin allocate_{count}gpu_ms_p99 {percentile(took, 99):.3f}")
            preferred = api_pb2.PreferredAllocationRequest(
                container_requests=[
                    api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=UUIDS, allocation_size=4)
                ]
            )
            took = []
            for _ in range(calls):
                began = time.perf_counter()
                await stub.GetPreferredAllocation(preferred, timeout=10)
                took.append((time.perf_counter() - began) * 1000)
            print(f"plugin preferred_4of8_ms_p99 {percentile(took, 99):.3f}")
        print(f"plugin rss_mib {rss_mib(process.pid):.1f}")
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            await process.wait()
        await kubelet.close()
        shutil.rmtree(directory, ignore_errors=True)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


async def bench_mixed_mig(starts: int) -> None:
    """a100-mig with --mig-strategy mixed: 6 resources, each its own server, socket and registration."""
    directory = Path(tempfile.mkdtemp(prefix="kg-bench-", dir="/tmp"))
    kubelet = Kubelet(directory)
    await kubelet.start()
    port = free_port()
    command = [sys.executable, "-m", "kubegpu", "--log-level", "warning", "plugin", "--machine", "a100-mig"]
    command += ["--mig-strategy", "mixed", "--kubelet-socket", str(kubelet.socket)]
    command += ["--fault-file", str(directory / "faults.jsonl"), "--metrics-listen", f"127.0.0.1:{port}"]
    process: asyncio.subprocess.Process | None = None
    try:
        took = []
        for _ in range(starts):
            if process is not None:
                process.terminate()
                await process.wait()
            began = time.perf_counter()
            process = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
            )
            last = 0.0
            for _ in range(6):
                last = await asyncio.wait_for(kubelet.registered.get(), 30)
            took.append((last - began) * 1000)
        assert process is not None
        print(f"plugin mig_mixed_6_resources_start_to_all_registered_ms_median {statistics.median(took):.1f}")
        lines = (await asyncio.to_thread(scrape, port)).count("\n")
        print(f"plugin mig_mixed_metrics_lines {lines}")
        print(f"plugin mig_mixed_rss_mib_metrics_on {rss_mib(process.pid):.1f}")
    finally:
        if process is not None and process.returncode is None:
            process.terminate()
            await process.wait()
        await kubelet.close()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=1000, help="Allocate calls per size (default 1000)")
    parser.add_argument("--faults", type=int, default=20, help="fault/recover rounds (default 20)")
    parser.add_argument("--restarts", type=int, default=10, help="kubelet.sock re-creations (default 10)")
    parser.add_argument("--starts", type=int, default=3, help="plugin process starts (default 3)")
    args = parser.parse_args()
    asyncio.run(bench(args.calls, args.faults, args.restarts, args.starts))
    asyncio.run(bench_mixed_mig(args.starts))


if __name__ == "__main__":
    main()
