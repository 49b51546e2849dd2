"""Benchmark a simulated GPU node: `kubegpu kubelet` and `kubegpu plugin` as real processes.

Prints the five figures of issue 2 as plain lines, each with its target:

    start -> registered (ms)                 <= 1000   plugin process spawned -> the emulator applied Register
    kubelet.sock re-created -> re-registered <= 500    the new kubelet.sock's ctime -> the emulator applied Register
    fault -> kubelet sees Unhealthy (ms)     <= 100    fault journal write -> the emulator applied the snapshot
    Allocate p50/p99 (ms), 1 and 8 GPUs      p99 <= 2  a kubelet-like gRPC client on the plugin socket
    plugin RSS (MiB)                         <= 50     VmRSS of the plugin process after the run

Times of "applied" come from the emulator's watch stream (each event carries the wall-clock time at
which the emulator applied the change). Usage: python bench/node.py [--machine dgx-a100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.gpu import faults, profiles
from kubegpu.kubelet import client
from kubegpu.localnode import LocalNode

RESOURCE = "nvidia.com/gpu"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _next_event(events: Any, kind: str, predicate: Any = lambda e: True) -> dict[str, Any]:
    for event in events:
        if event.get("event") == kind and predicate(event):
            return dict(event)
    raise TimeoutError(f"no {kind} event")


def _summary(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values):.0f}, max {values[-1]:.0f} (n={len(values)})"


def start_to_registered(node: LocalNode, repeat: int, gpus: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        with client.watch(node.socket_dir, timeout=30) as events:
            next(events)  # snapshot
            spawned = time.time()
            node.start_plugin()
            registered = _next_event(events, "registered")
        samples.append((registered["ts"] - spawned) * 1000)
        node.wait_for(lambda s: s["resources"].get(RESOURCE, {}).get("allocatable") == gpus)
        node.stop("plugin")
    return samples


def reregistration(node: LocalNode, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        node.stop("kubelet")
        node.start_kubelet()
        created = os.stat(node.socket_dir / constants.KUBELET_SOCKET_NAME).st_ctime
        with client.watch(node.socket_dir, timeout=30) as events:
            snapshot = next(events)
            resource = snapshot["status"]["resources"].get(RESOURCE, {})
            endpoint = resource.get("endpoint") or {}
            # Registered before the watch began: its time is unknown, so count up to now (an upper bound).
            registered = resource.get("registrations", 0) > 0 and not endpoint.get("stopped", True)
            ts = time.time() if registered else _next_event(events, "registered")["ts"]
        samples.append((ts - created) * 1000)
    return samples


def fault_to_unhealthy(node: LocalNode, repeat: int, uuids: list[str]) -> list[float]:
    samples = []
    for i in range(repeat):
        gpu = i % len(uuids)
        with client.watch(node.socket_dir, timeout=30) as events:
            next(events)
            written = time.time()
            node.inject(faults.Fault(kind="xid", gpu=gpu, xid=79))
            seen = _next_event(events, "devices", lambda e, u=uuids[gpu]: u in e.get("unhealthy", []))
            samples.append((seen["ts"] - written) * 1000)
            node.inject(faults.Fault(kind="recover", gpu=gpu))
            _next_event(events, "devices", lambda e, u=uuids[gpu]: u not in e.get("unhealthy", []))
    return samples


def allocate_latency(node: LocalNode, uuids: list[str], size: int, calls: int) -> tuple[float, float]:
    sock = node.socket_dir / "nvidia-gpu.sock"
    with grpc.insecure_channel(constants.unix_target(sock)) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=uuids[:size])]
        )
        for _ in range(50):  # warm up the channel and the server
            stub.Allocate(request, timeout=10)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            stub.Allocate(request, timeout=10)
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="dgx-a100")
    parser.add_argument("--repeat", type=int, default=5, help="samples of the start/re-registration figures")
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000, help="Allocate calls per size")
    args = parser.parse_args()
    machine = profiles.load(args.machine)
    uuids = [g.uuid for g in machine.gpus]
    print(f"node bench: {args.machine}, {len(uuids)} GPUs, load average {os.getloadavg()[0]:.1f}")
    with LocalNode(machine=args.machine) as node:
        node.start_kubelet()
        start = start_to_registered(node, args.repeat, len(uuids))
        print(f"start -> registered (ms): {_summary(start)}  [target <= 1000]")
        node.start_plugin()
        node.wait_for(lambda s: s["resources"].get(RESOURCE, {}).get("allocatable") == len(uuids))
        rereg = reregistration(node, args.repeat)
        print(f"kubelet.sock re-created -> re-registered (ms): {_summary(rereg)}  [target <= 500]")
        unhealthy = fault_to_unhealthy(node, args.faults, uuids)
        print(f"fault -> kubelet sees Unhealthy (ms): {_summary(unhealthy)}  [target <= 100]")
        for size in (1, min(8, len(uuids))):
            p50, p99 = allocate_latency(node, uuids, size, args.calls)
            print(f"Allocate {size} GPU(s) p50/p99 (ms): {p50:.2f} / {p99:.2f}  [target p99 <= 2]")
        pid = node.procs["plugin"].pid
        print(f"plugin RSS (MiB): {_rss_mib(pid):.1f}  [target <= 50]")
        node.stop("plugin", signal.SIGTERM)


if __name__ == "__main__":
    main()
