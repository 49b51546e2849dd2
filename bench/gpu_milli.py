"""Benchmark fractional GPUs on the node: what 1000 ``kubegpu.io/gpu-milli`` units per GPU cost the plugin's RPCs.

One ``kubegpu plugin`` resource served the way the supervisor serves it (real grpc.aio server, real unix socket,
a real client) for ``--machine`` (default ``dgx-a100``, 8 GPUs) with ``--gpu-milli all`` (8000 units), and the
whole-GPU ``nvidia.com/gpu`` of the same machine as the baseline. Per case, ``--calls`` times:

* ``list_and_watch``: a health change (one GPU Unhealthy, then Healthy) until the stream's next full list arrives,
  and that list's size in bytes;
* ``preferred``: GetPreferredAllocation of one container (500 units / 1 GPU) from everything available;
* ``allocate``: Allocate of those devices (the share env built, the one-GPU check run).

Prints p50/p99 in milliseconds, and with ``--json`` one JSON object. Timings on a shared machine are noisy.

    python bench/gpu_milli.py [--calls 200] [--machine dgx-a100] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.config import effective
from kubegpu.deviceplugin.plugin import server, supervisor
from kubegpu.deviceplugin.plugin.host import HostView
from kubegpu.deviceplugin.rm import resource_map, responses
from kubegpu.gpu import profiles


def _config(argv: list[str]) -> Any:
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    config = effective.resolve(effective.PLUGIN_FLAGS, parser.parse_args(argv), {}, None)
    effective.validate_flags(config)
    return config


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 3), "p99_ms": round(p99 * 1e3, 3)}


async def _case(machine_name: str, argv: list[str], name: str, size: int, calls: int, where: Path) -> dict[str, Any]:
    machine = profiles.load(machine_name)
    config = _config(argv)
    resource = resource_map.build(machine, config)[name]
    options = responses.ResponseOptions.from_config(config)
    handlers = supervisor.handlers_for(resource, machine, config, options, HostView(dev_root=None, driver_root=None))
    plugin = server.PluginServer(resource, where / resource.socket_name, handlers)
    await plugin.start()
    ids = list(resource.ids)
    sick = [d.id for d in resource.devices if d.gpu_index == 0]
    samples: dict[str, list[float]] = {"list_and_watch": [], "preferred": [], "allocate": []}
    size_bytes = 0
    try:
        async with grpc.aio.insecure_channel(constants.unix_target(plugin.socket_path)) as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            stream = stub.ListAndWatch(api_pb2.Empty())
            first = await stream.read()
            size_bytes = first.ByteSize()
            for n in range(calls):
                began = time.perf_counter()
                plugin.set_unhealthy(sick if n % 2 == 0 else [])
                await stream.read()
                samples["list_and_watch"].append(time.perf_counter() - began)
                request = api_pb2.PreferredAllocationRequest(
                    container_requests=[
                        api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=size)
                    ]
                )
                began = time.perf_counter()
                answer = await stub.GetPreferredAllocation(request)
                samples["preferred"].append(time.perf_counter() - began)
                chosen = list(answer.container_responses[0].deviceIDs)
                began = time.perf_counter()
                await stub.Allocate(
                    api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=chosen)])
                )
                samples["allocate"].append(time.perf_counter() - began)
            stream.cancel()
    finally:
        await plugin.stop()
    return {
        "resource": name,
        "devices": len(ids),
        "request": size,
        "list_bytes": size_bytes,
        **{case: _percentiles(values) for case, values in samples.items()},
    }


async def _measure(machine_name: str, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kg-milli-") as tmp:
        where = Path(tmp)
        whole = await _case(machine_name, [], "nvidia.com/gpu", 1, calls, where)
        milli = await _case(machine_name, ["--gpu-milli", "all"], "kubegpu.io/gpu-milli", 500, calls, where)
    return {"machine": machine_name, "calls": calls, "whole": whole, "milli": milli}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--machine", default="dgx-a100")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(_measure(args.machine, args.calls))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['machine']}: {result['calls']} calls per case (real gRPC over a unix socket)")
    for kind in ("whole", "milli"):
        case = result[kind]
        print(
            f"  {case['resource']} ({case['devices']} devices, request {case['request']}, list {case['list_bytes']} B)"
        )
        for rpc in ("list_and_watch", "preferred", "allocate"):
            print(f"    {rpc:<15} p50 {case[rpc]['p50_ms']:>8.3f} ms   p99 {case[rpc]['p99_ms']:>8.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
