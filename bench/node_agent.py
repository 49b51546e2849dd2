"""Node agent speed: one ``kubegpu kubelet --kubeconfig`` + ``kubegpu plugin`` on an API server.

Starts the agent and a simulated dgx-a100 plugin as real processes against the in-process API server
(tests/kubeapi) or a real one (``--kubeconfig``), then measures:

- start → Node Ready with ``nvidia.com/gpu: 8`` allocatable (registration, plugin registration, status);
- bound → Running: ``--pods`` one-GPU pods created with ``spec.nodeName`` set, in waves of 8 (the node's GPUs),
  each wave deleted again; the time from this script's create to the Running status seen by its watch,
  p50/p99; and the deletion (delete → gone from the watch) p50/p99;
- the agent's RSS after the run (from /proc).

    python bench/node_agent.py                     # in-process API server, 200 pods
    python bench/node_agent.py --json | tail -n 1
    python bench/node_agent.py --kubeconfig ~/.kube/config --pods 80   # a real API server (cleans up after)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GPU = "nvidia.com/gpu"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(kubeconfig: Path, pods: int) -> dict[str, Any]:
    from lightkube import ApiError, Client, KubeConfig
    from lightkube.resources.coordination_v1 import Lease
    from lightkube.resources.core_v1 import Namespace, Node, Pod

    from kubegpu.demo.localnode import LocalNode

    run_id = "kgbench-" + uuid.uuid4().hex[:6]
    client = Client(config=KubeConfig.from_file(kubeconfig), namespace=run_id)
    client.create(Namespace.from_dict({"metadata": {"name": run_id}}))
    node_name = f"{run_id}-gpu"
    local = LocalNode(
        kubelet_args=["--kubeconfig", str(kubeconfig), "--node-name", node_name, "--node-status-update-frequency", "1s"]
    )
    running_at: dict[str, float] = {}
    gone_at: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        watcher = Client(config=KubeConfig.from_file(kubeconfig), namespace=run_id)
        while not stop.is_set():
            with contextlib.suppress(Exception):
                for kind, pod in watcher.watch(Pod, namespace=run_id, server_timeout=5):
                    name = pod.metadata.name if pod.metadata else ""
                    if kind == "DELETED":
                        gone_at.setdefault(name, time.monotonic())
                    elif pod.status and pod.status.phase == "Running":
                        running_at.setdefault(name, time.monotonic())
                    if stop.is_set():
                        break

    try:
        started = time.monotonic()
        local.start_kubelet()
        local.start_plugin()
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(ApiError):
                node = client.get(Node, node_name)
                if node.status and (node.status.allocatable or {}).get(GPU) == "8":
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the node did not report 8 GPUs within 60 s")
            time.sleep(0.02)
        ready_s = time.monotonic() - started
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        time.sleep(0.5)  # let the watch open before the first create (a bench, not a test)
        created: dict[str, float] = {}
        deleted: dict[str, float] = {}
        for wave in range(0, pods, 8):
            names = [f"p{i}" for i in range(wave, min(wave + 8, pods))]
            for name in names:
                manifest = {
                    "metadata": {"name": name},
                    "spec": {
                        "nodeName": node_name,
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {GPU: 1}}}],
                    },
                }
                created[name] = time.monotonic()
                client.create(Pod.from_dict(manifest))
            deadline = time.monotonic() + 60
            while not all(n in running_at for n in names):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pods {names} not Running within 60 s")
                time.sleep(0.005)
            for name in names:
                deleted[name] = time.monotonic()
                client.delete(Pod, name)
            deadline = time.monotonic() + 60
            while not all(n in gone_at for n in names):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pods {names} not gone within 60 s")
                time.sleep(0.005)
        run_ms = np.array([(running_at[n] - created[n]) * 1000 for n in created])
        delete_ms = np.array([(gone_at[n] - deleted[n]) * 1000 for n in deleted])
        rss = _rss_mib(local.procs["kubelet"].pid)
    finally:
        stop.set()
        local.close()
        with contextlib.suppress(ApiError):
            client.delete(Node, node_name)
        with contextlib.suppress(ApiError):
            client.delete(Lease, node_name, namespace="kube-node-lease")
        with contextlib.suppress(ApiError):
            client.delete(Namespace, run_id)
    return {
        "pods": pods,
        "ready_s": round(ready_s, 3),
        "running_p50_ms": round(float(np.percentile(run_ms, 50)), 1),
        "running_p99_ms": round(float(np.percentile(run_ms, 99)), 1),
        "delete_p50_ms": round(float(np.percentile(delete_ms, 50)), 1),
        "delete_p99_ms": round(float(np.percentile(delete_ms, 99)), 1),
        "agent_rss_mib": round(rss, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, help="a real API server (default: the in-process one)")
    parser.add_argument("--pods", type=int, default=200, help="one-GPU pods, in waves of 8 (default: 200)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object of all figures")
    args = parser.parse_args()
    if args.pods < 1:
        parser.error("--pods: at least 1")
    if args.kubeconfig is not None:
        figures = run(args.kubeconfig, args.pods)
    else:
        sys.path.insert(0, str(ROOT))
        from tests.kubeapi import KubeApiServer

        with KubeApiServer() as server:
            figures = run(server.kubeconfig, args.pods)
    print(f"start -> Node Ready with 8 GPUs: {figures['ready_s']} s")
    print(
        f"bound -> Running ({figures['pods']} one-GPU pods, waves of 8): "
        f"p50 {figures['running_p50_ms']} ms, p99 {figures['running_p99_ms']} ms"
    )
    print(f"delete -> gone: p50 {figures['delete_p50_ms']} ms, p99 {figures['delete_p99_ms']} ms")
    print(f"agent RSS after the run: {figures['agent_rss_mib']} MiB")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
