"""Benchmark ``kubegpu exporter``: scrape latency p50/p99 and resident memory.

Runs the exporter as a real process (``kubegpu.demo.localnode.LocalNode``) on two simulated machines — a
DGX A100 (8 whole GPUs) and a 10-GPU A100 node cut into 64 MIG devices (a profile written to a temp
dir) — with pod attribution on
(a PodResourcesLister in this process holds one pod per device, so the exporter's gRPC client is
loaded and every series carries pod labels) and a 1 s collection interval, so scrapes overlap
collections. Scrapes use one keep-alive connection, as Prometheus does, with and without gzip.

Prints plain lines: ``exporter <machine> <what> <value>``. Targets: p99 <= 20 ms, RSS <= 50 MiB.

    python bench/exporter.py [--scrapes 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from kubegpu.api import constants
from kubegpu.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubegpu.demo.localnode import LocalNode
from kubegpu.gpu import profiles

MIG64_PROFILE = """\
name: a100-mig64
description: ten A100-SXM4-80GB cut into 64 MIG devices (8x 7x 1g.10gb, 2x 3x 2g.20gb + 1g.10gb)
machine_type: bench
gpu: {product_name: NVIDIA A100-SXM4-80GB, memory_mib: 81920, compute_capability: "8.0", mig_capable: true}
gpus:
"""


def mig64_profile(directory: Path) -> Path:
    lines = [MIG64_PROFILE]
    for i in range(10):
        layout = ["1g.10gb"] * 7 if i < 8 else ["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"]
        lines.append(
            f'  - {{pci_bus_id: "00000000:{0x10 + i:02X}:00.0", numa: {i // 5}, pcie: [cpu{i // 5}, hb{i}], '
            f"mig: [{', '.join(layout)}]}}\n"
        )
    path = directory / "a100-mig64.yaml"
    path.write_text("".join(lines))
    return path


class _Lister(api_pb2_grpc.PodResourcesListerServicer):
    """One pod per device ID, as a busy node would have."""

    def __init__(self, device_ids: list[str], resource: str) -> None:
        self.response = api_pb2.ListPodResourcesResponse()
        for n, device_id in enumerate(device_ids):
            pod = self.response.pod_resources.add(name=f"job-{n}", namespace="bench")
            pod.containers.add(name="main").devices.add(resource_name=resource, device_ids=[device_id])

    async def List(self, request: Any, context: Any) -> api_pb2.ListPodResourcesResponse:
        return self.response


def serve_pods(socket_path: Path, device_ids: list[str], resource: str) -> threading.Event:
    """Serve the lister on ``socket_path`` from a background thread until the returned event is set."""
    stop = threading.Event()
    started = threading.Event()

    async def run() -> None:
        server = grpc.aio.server()
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(_Lister(device_ids, resource), server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(constants.unix_target(socket_path))
        await server.start()
        started.set()
        await asyncio.to_thread(stop.wait)
        await server.stop(grace=None)

    threading.Thread(target=lambda: asyncio.run(run()), daemon=True).start()
    started.wait(30)
    return stop


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return rss, hwm


def scrape_times(port: int, count: int, gzip: bool) -> tuple[list[float], int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    times: list[float] = []
    size = 0
    for _ in range(count):
        started = time.perf_counter()
        conn.request("GET", "/metrics", headers=headers)
        response = conn.getresponse()
        body = response.read()
        times.append(time.perf_counter() - started)
        size = len(body)
    conn.close()
    return times, size


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def bench(label: str, machine: str, scrapes: int) -> None:
    loaded = profiles.load(machine)
    migs = [m.uuid for g in loaded.gpus for m in g.mig_devices]
    device_ids = migs or [g.uuid for g in loaded.gpus]
    resource = "nvidia.com/mig-1g.10gb" if migs else "nvidia.com/gpu"
    with LocalNode(machine=machine) as node:  # the exporter alone, on the pod-resources socket served here
        node.pod_resources_socket.parent.mkdir(parents=True, exist_ok=True)
        stop_pods = serve_pods(node.pod_resources_socket, device_ids, resource)
        try:
            proc = node.start_exporter(collect_interval_ms=1000)
            port = node.exporter_port
            scrape_times(port, 20, gzip=False)  # warm up: first collections, connection set-up
            plain, plain_size = scrape_times(port, scrapes, gzip=False)
            packed, packed_size = scrape_times(port, scrapes, gzip=True)
            rss, hwm = rss_kib(proc.pid)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/metrics")
            page = conn.getresponse().read().decode()
            conn.close()
        finally:
            node.stop("exporter", timeout=20)
            stop_pods.set()
    series = sum(1 for line in page.splitlines() if line.startswith("DCGM_"))
    labelled = sum(1 for line in page.splitlines() if line.startswith("DCGM_") and ',pod="' in line)
    collect = re.search(r"^kubegpu_exporter_collect_duration_seconds (\S+)$", page, re.MULTILINE)
    print(f"exporter {label} devices {len(device_ids)} dcgm_series {series} with_pod_labels {labelled}")
    print(f"exporter {label} page_bytes {plain_size} gzip_bytes {packed_size}")
    for name, times in (("plain", plain), ("gzip", packed)):
        p50, p99 = percentile(times, 50) * 1000, percentile(times, 99) * 1000
        print(f"exporter {label} scrape_{name}_ms p50 {p50:.2f} p99 {p99:.2f} max {max(times) * 1000:.2f}")
    print(f"exporter {label} collect_s {collect.group(1) if collect else 'n/a'}")
    print(f"exporter {label} rss_mib {rss / 1024:.1f} peak_rss_mib {hwm / 1024:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=1000, help="scrapes per machine and encoding (default 1000)")
    args = parser.parse_args()
    bench("dgx-a100(8 GPUs)", "dgx-a100", args.scrapes)
    with tempfile.TemporaryDirectory(prefix="kg-bench-") as tmp:
        bench("a100-mig64(64 MIG)", str(mig64_profile(Path(tmp))), args.scrapes)


if __name__ == "__main__":
    main()
