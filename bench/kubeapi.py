"""Benchmark the in-process API server (tests/kubeapi) that live tests and bench/scheduler.py run against, so that
its own cost is known when their figures are read: server start/stop time, then through lightkube's async client
(one connection pool, ``--concurrency`` requests in flight) pods created/s, bound/s (pods/binding) and
status-patched/s, and watch latency: from sending a binding to its MODIFIED event on a watch of pods (same client
loop, so it includes the client's own queueing at that concurrency).

    python bench/kubeapi.py [--pods 2000] [--concurrency 16] [--process] [--json]

``--process`` runs the server as its own process (``python -m tests.kubeapi``) instead of a thread of this one, so
the client and the server do not share a GIL.

With ``--json`` the last line is one JSON object with the figures. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightkube import AsyncClient, KubeConfig
from lightkube.resources.core_v1 import Namespace, Pod

from tests.kubeapi import KubeApiServer


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _in_batches(count: int, concurrency: int, one: Any) -> float:
    started = time.perf_counter()
    queue = list(range(count))

    async def worker() -> None:
        while queue:
            await one(queue.pop())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def run(kubeconfig: Path, pods: int, concurrency: int) -> dict[str, Any]:
    client = AsyncClient(config=KubeConfig.from_file(kubeconfig), namespace="bench")
    await client.create(Namespace.from_dict({"metadata": {"name": "bench"}}))
    spec = {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}

    async def create(i: int) -> None:
        await client.create(Pod.from_dict({"metadata": {"name": f"p{i}"}, "spec": spec}))

    create_rate = await _in_batches(pods, concurrency, create)
    http = client._client._client  # lightkube's httpx client: Binding's Status answer is read raw
    sent_at: dict[str, float] = {}
    seen_at: dict[str, float] = {}
    listing = client.list(Pod)
    _ = [p async for p in listing]

    async def watch() -> None:
        async for event_type, pod in client.watch(Pod, resource_version=listing.resourceVersion):
            if event_type == "MODIFIED" and pod.spec.nodeName and pod.metadata.name not in seen_at:
                seen_at[pod.metadata.name] = time.perf_counter()
                if len(seen_at) == pods:
                    return

    watcher = asyncio.create_task(watch())

    async def bind(i: int) -> None:
        sent_at[f"p{i}"] = time.perf_counter()
        answer = await http.post(
            f"/api/v1/namespaces/bench/pods/p{i}/binding",
            json={
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": f"p{i}"},
                "target": {"kind": "Node", "name": f"node-{i % 500}"},
            },
        )
        assert answer.status_code == 201, answer.text

    bind_rate = await _in_batches(pods, concurrency, bind)
    await asyncio.wait_for(watcher, 60)
    latencies = [(seen_at[name] - sent_at[name]) * 1000 for name in sent_at]

    async def patch_status(i: int) -> None:
        await client.patch(Pod.Status, f"p{i}", {"status": {"phase": "Running"}})

    status_rate = await _in_batches(pods, concurrency, patch_status)
    await client.close()
    return {
        "pods": pods,
        "concurrency": concurrency,
        "create_per_s": round(create_rate, 1),
        "bind_per_s": round(bind_rate, 1),
        "status_patch_per_s": round(status_rate, 1),
        "watch_p50_ms": round(statistics.median(latencies), 2),
        "watch_p99_ms": round(percentile(latencies, 0.99), 2),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--process", action="store_true", help="run the server as a separate process")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    starts = []
    for _ in range(5):
        started = time.perf_counter()
        with KubeApiServer():
            pass
        starts.append((time.perf_counter() - started) * 1000)
    if args.process:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            root = Path(__file__).resolve().parents[1]
            server_process = subprocess.Popen(
                [sys.executable, "-m", "tests.kubeapi", "--kubeconfig", str(kubeconfig)],
                cwd=root,
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert server_process.stdout is not None
                server_process.stdout.readline()  # "serving ..." once it listens
                before = _cpu_seconds(server_process.pid)
                figures = asyncio.run(run(kubeconfig, args.pods, args.concurrency))
                # create + bind + status patch per pod, plus the list: the server's own CPU per request
                spent = _cpu_seconds(server_process.pid) - before
                figures["server_cpu_ms_per_request"] = round(spent * 1000 / (3 * args.pods + 1), 3)
            finally:
                server_process.terminate()
                server_process.wait(timeout=10)
    else:
        with KubeApiServer() as server:
            figures = asyncio.run(run(server.kubeconfig, args.pods, args.concurrency))
    figures["server"] = "process" if args.process else "thread"
    figures["start_stop_ms"] = round(statistics.median(starts), 1)
    print(f"server start+stop: {figures['start_stop_ms']} ms (median of 5)")
    print(
        f"{args.pods} pods, {args.concurrency} in flight: create {figures['create_per_s']}/s, "
        f"bind {figures['bind_per_s']}/s, status patch {figures['status_patch_per_s']}/s"
    )
    print(f"bind request sent -> its watch event: p50 {figures['watch_p50_ms']} ms, p99 {figures['watch_p99_ms']} ms")
    if "server_cpu_ms_per_request" in figures:
        print(f"server CPU per request: {figures['server_cpu_ms_per_request']} ms")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
